"""How fast are rnnfast's kernels against the best BLAS, and its quantized kernels against its
float32 ones (the Google Benchmark sources of the same kernels are in bench/cpp/)."""
