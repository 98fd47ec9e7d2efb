"""What rnnfast costs inside other frameworks' workflows: the exported ONNX graph under ONNX
Runtime, and rnnfast.torch.RNN inside a PyTorch training loop."""
