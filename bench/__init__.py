"""rnnfast's benchmark scripts, grouped by the question they answer (README.md beside this file
lists them, with their commands and how long they run), and where they read and write.

Each runs from the repository root as ``python -m bench.<folder>.<name>``; what they share is in
``bench._common``. Only pathlib is imported here, so that a script's first lines run before any
library loads (``bench.system.distributed`` sets its BLAS threads there, and
``bench.system.memory``'s children measure their own memory).
"""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"  # every script's default output folder (git-ignored)
# The data sets beside the checkout (ROOT/names, ROOT/tinyshakespeare, ROOT/sunspots), where
# the scripts look first; else rnnfast.datasets' lookup
SHARED_DATA = REPO.parent / "shared" / "data"
