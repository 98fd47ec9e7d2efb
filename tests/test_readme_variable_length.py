"""The README's "Variable-length sequences" section runs as written."""

from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _section_blocks(title):
    text = README.read_text(encoding="utf-8")
    section = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    return [b.split("```", 1)[0] for b in section.split("```python\n")[1:]]


def test_variable_length_section_runs(capsys):
    blocks = _section_blocks("Variable-length sequences")
    assert blocks, "the section has no python block"
    namespace = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)
    assert len(namespace["predicted"]) == len(namespace["ids"])
    assert [p.shape[0] for p in namespace["predicted"]] == [len(t) for t in namespace["tags"]]
    assert namespace["logits"].shape == (len(namespace["ids"]), 2)
    assert "accuracy" in capsys.readouterr().out
