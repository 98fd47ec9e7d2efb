"""How fast is rnnfast against its peers (torch.nn.RNN, ONNX Runtime, the NumPy loop, unfused
BLAS) on the recurrent layer itself: ``python -m bench.peers.compare``."""
