#!/usr/bin/env bash
# valgrind memcheck over a small forward/backward workload (tools/memcheck_script.py, or a
# script given as the first argument), once per ISA valgrind can run (avx2, baseline; valgrind
# has no AVX-512 and hides it from CPUID, so the dispatcher never picks it there).
#
# CPython's own noise is kept out by PYTHONMALLOC=malloc (no pymalloc arenas), valgrind's
# python suppressions when present, and by reporting only what involves rnnfast: an error or
# a "definitely lost" block is counted when a frame of its stack is in rnnfast's module
# (_core*.so) or its sources (cpp/). The full valgrind log is kept for reading.
#
#   tools/memcheck.sh                     # build a debug-info copy (once), run, summarise
#   MEMCHECK_PYTHON=python tools/memcheck.sh   # use that interpreter's rnnfast as installed
#                                              # (stripped: frames show as ??? in _core*.so)
#   MEMCHECK_ISAS="avx2" tools/memcheck.sh my_script.py
#
# Exit status: 0 when no rnnfast error and no rnnfast definite leak, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

SCRIPT=${1:-tools/memcheck_script.py}
ISAS=${MEMCHECK_ISAS:-avx2 baseline}
LOGDIR=${MEMCHECK_LOGDIR:-/tmp/rnnfast-memcheck}
mkdir -p "$LOGDIR"

if [[ -z "${MEMCHECK_PYTHON:-}" ]]; then
  # A separate, unstripped RelWithDebInfo build (line numbers in the report) in its own venv,
  # like tools/sanitize.sh, so the developer's install is untouched.
  VENV=${MEMCHECK_VENV:-/tmp/rnnfast-memcheck-venv}
  BUILD=${MEMCHECK_BUILD:-/tmp/rnnfast-memcheck-build}
  PY=${PYTHON:-python3}
  [[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
  BASE_SITE=$("$PY" -c 'import sysconfig; p = sysconfig.get_paths(); print(p["purelib"]); print(p["platlib"])' | sort -u)
  VENV_SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  printf '%s\n' $BASE_SITE > "$VENV_SITE/_rnnfast_base_site.pth"
  if [[ "${MEMCHECK_REBUILD:-1}" != 0 ]] || ! (cd / && "$VENV/bin/python" -c 'import rnnfast._core' 2>/dev/null); then
    echo "== building an unstripped RelWithDebInfo rnnfast in $BUILD" >&2
    "$VENV/bin/python" -m pip install --no-build-isolation --no-deps --force-reinstall -q . \
      -Cbuild-dir="$BUILD" -Ccmake.build-type=RelWithDebInfo -Cinstall.strip=false
  fi
  MEMCHECK_PYTHON="$VENV/bin/python"
fi

SUPP=()
for s in /usr/lib/valgrind/python3.supp /usr/lib/x86_64-linux-gnu/valgrind/python3.supp; do
  [[ -f "$s" ]] && SUPP+=("--suppressions=$s")
done

status=0
for isa in $ISAS; do
  log="$LOGDIR/memcheck-$isa.log"
  echo "== valgrind memcheck, RNNFAST_ISA=$isa: $SCRIPT (log: $log)" >&2
  start=$(date +%s)
  # Run from / so that the checkout's python/ cannot shadow the installed package.
  (cd / && PYTHONMALLOC=malloc RNNFAST_ISA=$isa OMP_WAIT_POLICY=passive GOMP_SPINCOUNT=0 \
    valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite \
      --errors-for-leak-kinds=definite --num-callers=40 --track-origins=yes \
      "${SUPP[@]}" --log-file="$log" \
      "$MEMCHECK_PYTHON" "$ROOT/$SCRIPT") || { echo "== the workload failed under valgrind" >&2; status=1; }
  echo "== $(( $(date +%s) - start )) s" >&2

  # Split the log into records (blank-line separated), keep those with an rnnfast frame.
  python3 - "$log" <<'PYEOF' || status=1
import re, sys
text = open(sys.argv[1]).read()
body = re.sub(r"^==\d+== ?", "", text, flags=re.M)
records = [r.strip("\n") for r in re.split(r"\n\s*\n", body) if r.strip()]
ours = re.compile(r"_core\.cpython|/cpp/(rnnfast|bindings)/|rnnfast::")
summary = [r for r in records if r.startswith(("ERROR SUMMARY", "LEAK SUMMARY", "HEAP SUMMARY"))]
errors = [r for r in records
          if re.match(r"(Invalid|Conditional jump|Use of uninitialised|Syscall param|Mismatched"
                      r"|Source and destination overlap|Argument|Invalid free)", r)
          and ours.search(r)]
leaks = [r for r in records if "definitely lost in loss record" in r and ours.search(r)]
for r in summary:
    print("   " + r.replace("\n", "\n   "))
m = re.search(r"ERROR SUMMARY: (\d+) errors", body)
print(f"   all errors (CPython, NumPy, libgomp included): {m.group(1) if m else '?'}")
print(f"   errors in rnnfast frames: {len(errors)}; definitely lost in rnnfast frames: {len(leaks)}")
for r in errors + leaks:
    print("----\n" + r)
sys.exit(1 if errors or leaks else 0)
PYEOF
done
exit $status
