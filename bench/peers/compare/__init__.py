"""compare: rnnfast against torch.nn.RNN, ONNX Runtime's RNN, the NumPy loop and an unfused BLAS
anchor, each row set against the machine's roofline and issue 13's targets.

    python -m bench.peers.compare [--quick] [...]     (cli.py's docstring says it all)

The parts, one job each: shapes (the grid, the extra shapes, the problems and their FLOPs),
runners (one runner per library, the blas anchor among them), roofline (the machine's matmul
rate and bandwidth), measure (agreement, timing, per-ISA timing, the result rows), targets
(issue 13's targets), quantized (the bf16 / int8 rows) and report (tables, JSON, chart); cli
reads the command line and runs them in order.
"""
