"""Every ```python block of README.md runs as written, on its own: each in a fresh interpreter
(a subprocess), in an empty temporary folder.

A block that imports an optional package (torch, keras, threadpoolctl, onnxruntime: all in the
test extra), or uses rnnfast.onnx (which imports onnx), is skipped where that package is missing,
unless RNNFAST_REQUIRE_TORCH=1 (as in CI), which makes it fail instead. A block that loads a data
set gets RNNFAST_DATA=../shared/data where that folder is beside the checkout (skipped
otherwise), a private cache and no network.
"""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
OPTIONAL = ("torch", "keras", "threadpoolctl", "onnx", "onnxruntime")
FENCE = re.compile(r"^([ \t]*)```(\w*)[ \t]*$")


def python_blocks():
    """(id, code) of every python block: its id the title of the section it is in and its
    number there; the code dedented (a block may sit in a list item)."""
    blocks, counts, title = [], {}, "top"
    fence = body = None  # (indent, language) of the open block and its lines
    for line in README.read_text(encoding="utf-8").splitlines():
        match = FENCE.match(line)
        if fence is None and match:
            fence, body = (match.group(1), match.group(2)), []
        elif fence is not None and match and match.group(1) == fence[0] and not match.group(2):
            if fence[1] == "python":
                counts[title] = counts.get(title, 0) + 1
                slug = re.sub(r"\W+", "-", title.lower()).strip("-")
                blocks.append((f"{slug}-{counts[title]}", textwrap.dedent("\n".join(body))))
            fence = None
        elif fence is not None:
            body.append(line)
        elif line.startswith("#"):
            title = line.lstrip("#").strip()
    assert fence is None, "README.md: a code block is not closed"
    return blocks


BLOCKS = python_blocks()

# What some blocks must also have computed: run after the block, in its interpreter.
CHECKS = {
    "usage-3": "assert len(history['val_loss']) == 3 and np.isfinite(history['val_loss']).all()",
    "variable-length-sequences-1": """
assert len(predicted) == len(ids)
assert [p.shape for p in predicted] == [(len(t), 4) for t in tags]
assert logits.shape == (len(ids), 2)
""",
    "for-pytorch-users-1": """
assert np.abs(y - y_torch.detach().numpy()).max() < 1e-5
assert np.abs(h_n - h_torch.detach().numpy()).max() < 1e-5
assert isinstance(back, torch.nn.RNN) and back.bidirectional and back.num_layers == 2
""",
    "for-keras-users-1": "assert np.abs(layer(x) - expected).max() < 1e-5",
    "export-and-serve-with-onnx-runtime-or-with-rnnfast-1": """
assert y_ort.shape == expected.shape == (12, 3, 5)
assert np.abs(y_ort - expected).max() < 1e-5 and np.abs(y_fast - expected).max() < 1e-5
""",
    "a-model-trained-in-pytorch-served-without-torch-1": """
assert isinstance(model, rnnfast.Sequential) and y.shape == (3, 50, 1)
assert np.abs(y - net(torch.from_numpy(x)).detach().numpy()).max() < 1e-5
""",
    "quantized-models-bf16-and-int8-weights-1": (
        "assert q.quantized == 'int8' and np.abs(q(x) - model(x)).max() < 0.05"
    ),
    "training-in-pytorch-on-rnnfast-s-kernels-1": """
assert isinstance(net.rnn, rnnfast.torch.RNN) and type(plain) is torch.nn.RNN
assert torch.equal(plain.weight_hh_l0, net.rnn.weight_hh_l0)
assert all(p.grad is not None for p in net.rnn.parameters())
""",
    "the-examples-and-their-data-1": """
assert len(names) == 18 and sum(map(len, names.values())) == 20050
assert spots.values.shape == (3126,)
""",
}


def test_the_readme_has_its_python_blocks():
    ids = [i for i, _ in BLOCKS]
    assert len(ids) >= 8, ids
    for section in (
        "usage",
        "for-pytorch-users",
        "for-keras-users",
        "variable-length-sequences",
        "threads-beside-numpy-and-pytorch",
        "the-examples-and-their-data",
        "export-and-serve-with-onnx-runtime-or-with-rnnfast",
        "a-model-trained-in-pytorch-served-without-torch",
        "training-in-pytorch-on-rnnfast-s-kernels",
        "quantized-models-bf16-and-int8-weights",
    ):
        assert any(i.startswith(section + "-") for i in ids), (section, ids)


def _closed_port_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_every_check_has_its_block():
    assert set(CHECKS) <= {i for i, _ in BLOCKS}


@pytest.mark.parametrize("block, code", BLOCKS, ids=[i for i, _ in BLOCKS])
def test_block_runs_on_its_own(block, code, tmp_path):
    imported = set(re.findall(r"^\s*(?:import|from)\s+(\w+)", code, re.M))
    if "rnnfast.onnx" in code:
        imported.add("onnx")
    for name in sorted(imported & set(OPTIONAL)):
        if importlib.util.find_spec(name) is None:
            if os.environ.get("RNNFAST_REQUIRE_TORCH") == "1":
                pytest.fail(f"{name} is not installed (RNNFAST_REQUIRE_TORCH=1)")
            pytest.skip(f"{name} is not installed")
    env = {k: v for k, v in os.environ.items() if k != "RNNFAST_DATA"}
    env.update(XDG_CACHE_HOME=str(tmp_path / "cache"), RNNFAST_DATA_URL=_closed_port_url())
    if "datasets.load(" in code:
        if not SHARED.is_dir():
            pytest.skip("../shared/data is not beside the checkout")
        env["RNNFAST_DATA"] = str(SHARED)
    check = textwrap.dedent(CHECKS.get(block, ""))
    done = subprocess.run(
        [sys.executable, "-c", code + "\n" + check],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
