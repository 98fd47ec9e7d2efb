#!/usr/bin/env bash
# Build rnnfast with AddressSanitizer + UndefinedBehaviorSanitizer into its own virtual
# environment and build directory (never the developer's editable install), then run tests
# under them. Exits non-zero on a test failure or on any sanitizer report.
#
#   tools/sanitize.sh                      # representative fast subset (a few minutes)
#   tools/sanitize.sh tests                # the whole suite
#   tools/sanitize.sh tests/nn/test_rnn_step.py -k relu   # anything pytest accepts
#
# Environment:
#   SAN_VENV    venv to build into      (default: /tmp/rnnfast-asan-venv)
#   SAN_BUILD   CMake build directory   (default: /tmp/rnnfast-asan-build)
#   SAN_LIST    sanitizers              (default: address;undefined)
#   SAN_REBUILD=0  reuse an existing build if the venv already has one (default: rebuild;
#                  incremental, so cheap when nothing changed)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

SAN_VENV=${SAN_VENV:-/tmp/rnnfast-asan-venv}
SAN_BUILD=${SAN_BUILD:-/tmp/rnnfast-asan-build}
SAN_LIST=${SAN_LIST:-address;undefined}
SAN_REBUILD=${SAN_REBUILD:-1}
PY=${PYTHON:-python3}

DEFAULT_SUBSET=(
  tests/test_parity_reference.py
  tests/test_bad_input.py
  tests/test_leaky_lengths_kernels.py
  tests/nn/test_rnn_step.py
  tests/nn/test_rnn_composition.py
  tests/test_losses.py
  tests/nn/test_embedding_fusion.py
  tests/test_functional_masks.py
  tests/test_functional_backward_args.py
  tests/test_gated_kernels.py
  tests/test_quantized_gated_kernels.py
  tests/nn/test_deep_transition.py
  tests/precision
)

if [[ ! -x "$SAN_VENV/bin/python" ]]; then
  "$PY" -m venv "$SAN_VENV"
fi
VPY="$SAN_VENV/bin/python"
# numpy, pytest, hypothesis, torch, scikit-build-core, pybind11 come from the base
# interpreter: its site-packages is put on the venv's sys.path by a plain path line in a .pth
# file. Not --system-site-packages: that would also run the base's .pth hooks, and the import
# hook of an editable install there (pip install -e .) would then shadow the sanitized build.
BASE_SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"]); print(sysconfig.get_paths()["platlib"])' | sort -u)
VENV_SITE=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
printf '%s\n' $BASE_SITE > "$VENV_SITE/_rnnfast_base_site.pth"

# The Python interpreter is not instrumented, so the ASan runtime must be loaded first, and
# libstdc++ with it: ASan resolves its __cxa_throw interceptor when it starts, and without
# libstdc++ already loaded the first C++ exception (any ValueError raised by the bindings)
# aborts with "CHECK failed: ... real___cxa_throw != 0".
LIBASAN=$(gcc -print-file-name=libasan.so)
LIBUBSAN=$(gcc -print-file-name=libubsan.so)
LIBSTDCXX=$(gcc -print-file-name=libstdc++.so)
PRELOAD=""
[[ "$SAN_LIST" == *address* ]] && PRELOAD="$LIBASAN:$LIBSTDCXX"
[[ "$SAN_LIST" == *undefined* && "$SAN_LIST" != *address* ]] && PRELOAD="$LIBUBSAN"

if [[ "$SAN_REBUILD" != 0 ]] || ! (cd / && ASAN_OPTIONS=detect_leaks=0 LD_PRELOAD="$PRELOAD" \
    "$VPY" -c 'import rnnfast._core' 2>/dev/null); then
  echo "== building rnnfast with -fsanitize=${SAN_LIST//;/,} in $SAN_BUILD" >&2
  "$VPY" -m pip install --no-build-isolation --no-deps --force-reinstall -q . \
    -Cbuild-dir="$SAN_BUILD" \
    -Ccmake.define.RNNFAST_SANITIZE="$SAN_LIST" \
    -Ccmake.build-type=RelWithDebInfo
fi

LOGDIR=$(mktemp -d /tmp/rnnfast-san-logs.XXXXXX)
# detect_leaks=0: CPython leaks by design at exit. allocator_may_return_null=1: a huge
# allocation returns NULL (MemoryError, as without ASan) instead of aborting the run.
# Reports are written to per-process files in LOGDIR (log_path), so a report in a subprocess
# or one swallowed by pytest is still seen; they are printed at the end.
export ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:abort_on_error=1:halt_on_error=1:strict_init_order=1:detect_stack_use_after_return=1:check_initialization_order=1:log_path=$LOGDIR/asan${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$LOGDIR/ubsan${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# Keep the run off the developer's source tree: import the package from the venv.
export PYTHONPATH=""
export PYTHONMALLOC=malloc   # let ASan see Python-side allocations too (e.g. NumPy buffers)

if [[ $# -eq 0 ]]; then set -- "${DEFAULT_SUBSET[@]}"; fi
# Tests that cannot run under ASan: they cap the address space (RLIMIT_AS) of a child Python,
# and ASan reserves terabytes of virtual shadow memory at start-up, so the child aborts before
# running a line. Not a finding; the same code paths run under valgrind (tools/memcheck.sh).
ASAN_INCOMPATIBLE=(
  tests/test_bad_input.py::test_huge_broadcast_input_is_refused_not_allocated
)
DESELECT=()
if [[ "$SAN_LIST" == *address* ]]; then
  for t in "${ASAN_INCOMPATIBLE[@]}"; do DESELECT+=(--deselect "$t"); done
fi

# Sanity: the sanitized module is the one imported.
(cd / && LD_PRELOAD="$PRELOAD" SAN_VENV="$SAN_VENV" "$VPY" - <<'PYEOF'
import os, sys
import rnnfast, rnnfast._core as c
venv = os.path.realpath(os.environ["SAN_VENV"])
for m in (rnnfast, c):
    assert os.path.realpath(m.__file__).startswith(venv), f"not the sanitized build: {m.__file__}"
print("== testing", c.__file__, file=sys.stderr)
PYEOF
)

start=$(date +%s)
set +e
# -p no:cacheprovider: do not write .pytest_cache into the checkout; --rootdir keeps pytest.ini
# options (filterwarnings=error, strict markers) from pyproject.toml.
LD_PRELOAD="$PRELOAD" "$VPY" -m pytest -q -p no:cacheprovider --rootdir="$ROOT" "${DESELECT[@]}" "$@"
rc=$?
set -e
echo "== pytest exit $rc after $(( $(date +%s) - start )) s" >&2

# A report is an error; ASan's warnings (e.g. "failed to allocate 0x... bytes" for a test's
# deliberately huge array, which became a MemoryError) are shown but do not fail the run.
pattern='ERROR: (Address|Leak)Sanitizer|runtime error:|SUMMARY: [A-Za-z]+Sanitizer|CHECK failed'
reports=$(grep -l -E "$pattern" -r "$LOGDIR" 2>/dev/null || true)
warnings=$(grep -h -c WARNING -r "$LOGDIR" 2>/dev/null | awk '{s += $1} END {print s + 0}' || true)
[[ "$warnings" -gt 0 ]] && echo "== $warnings sanitizer warning(s) (not errors), in $LOGDIR" >&2
if [[ -n "$reports" ]]; then
  echo "== SANITIZER REPORTS:" >&2
  for f in $reports; do echo "--- $f" >&2; cat "$f" >&2; done
  exit 1
fi
[[ "$warnings" -gt 0 ]] || rm -rf "$LOGDIR"
if [[ $rc -ne 0 ]]; then exit "$rc"; fi
echo "== sanitizers clean" >&2
