"""How rnnfast uses the machine: peak memory, its threads beside NumPy's and PyTorch's pools,
and data-parallel scaling over MPI ranks."""
