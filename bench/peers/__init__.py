"""How fast is rnnfast against its peers (torch.nn.RNN / GRU / LSTM, ONNX Runtime, OpenVINO, JAX,
the NumPy loop, unfused BLAS) on the recurrent layers themselves: ``python -m bench.peers.compare``."""
