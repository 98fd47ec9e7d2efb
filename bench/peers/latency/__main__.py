"""``python -m bench.peers.latency``: see cli.py."""

from bench._common import reexec_without_blas_overrides
from bench.peers.latency.cli import main

reexec_without_blas_overrides()
main()
