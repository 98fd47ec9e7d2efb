"""compare: rnnfast's Elman, GRU and LSTM layers against torch.nn.RNN / GRU / LSTM, ONNX Runtime,
OpenVINO, JAX, the NumPy loop and an unfused BLAS anchor, each row set against the machine's
roofline and the targets of issues 13 (Elman) and 23 (GRU, LSTM).

    python -m bench.peers.compare [--quick] [--cells rnn,gru,lstm] [...]   (cli.py says it all)

The parts, one job each: shapes (the grid, the extra shapes, the cells, the problems and their
FLOPs), runners (rnnfast's, the NumPy reference's and torch's runners per cell, and all_runners),
blas (the unfused anchor), onnx_peers (ORT and OpenVINO on one ONNX graph per cell), jax_peer and
jax_worker (JAX in a pinned child process per thread count), roofline (the machine's matmul rate
and bandwidth), measure (agreement, timing, per-ISA timing, the result rows), targets (issues
13's and 23's targets), quantized (the bf16 / int8 rows) and report (tables, JSON, chart); cli
reads the command line and runs them in order.
"""
