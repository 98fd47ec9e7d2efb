"""latency: rnnfast in the latency regime of issue 41 (small batches, short calls, 1 and 2
threads) against torch, ONNX Runtime and OpenVINO in float32, bf16 and int8, each row beside its
bound (the L2 matrix-vector bound at B <= 16), with two threads against one and compare's grid.

    python -m bench.peers.latency [--compare-grid] [...]   (cli.py says it all)

The parts, one job each: runners (every library's runners per format and mode, compare's and
bench.kernels' reused), bound (the L2 bandwidth and a row's bound), measure (checks, timing,
rows, targets, two threads against one, compare's grid through its measure.bench_shape) and
report (tables, JSON); cli reads the command line and runs them in order.
"""
