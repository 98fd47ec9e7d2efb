"""``python -m bench.peers.compare``: see cli.py."""

from bench.peers.compare.cli import main

main()
