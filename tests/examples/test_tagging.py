"""examples/tagging.py on small CoNLL-U data written here: a learnable tag rule, both forms of
--data (one file, a treebank folder), and clear errors for bad --data."""

from __future__ import annotations

import re
from pathlib import Path

import example_run
import numpy as np
import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tagging.py"
RESULT = re.compile(r"^RESULT test_accuracy=(\d\.\d{4}) time_s=(\d+\.\d)$")

# Each word has one tag, except "saw", tagged by the word after it ("saw" before a determiner
# is a VERB, at the end of a sentence a NOUN), which only a model that reads the right
# context can get right.
LEXICON = {
    "the": "DET",
    "a": "DET",
    "this": "DET",
    "cat": "NOUN",
    "dog": "NOUN",
    "bird": "NOUN",
    "tree": "NOUN",
    "runs": "VERB",
    "sees": "VERB",
    "likes": "VERB",
    "big": "ADJ",
    "red": "ADJ",
    "old": "ADJ",
    "quickly": "ADV",
    "often": "ADV",
    ".": "PUNCT",
    "!": "PUNCT",
}


def sentences(n, seed):
    """``n`` random sentences as (form, upos) lists, following LEXICON."""
    rng = np.random.default_rng(seed)
    words = sorted(LEXICON)
    out = []
    for _ in range(n):
        forms = list(rng.choice(words, size=rng.integers(2, 9)))
        if rng.random() < 0.5:
            forms[-1:-1] = ["saw"] if rng.random() < 0.5 else ["saw", "the"]
        tags = [LEXICON.get(w) for w in forms]
        for i, w in enumerate(forms):
            if w == "saw":
                tags[i] = "VERB" if i + 1 < len(forms) and tags[i + 1] == "DET" else "NOUN"
        out.append(list(zip(forms, tags)))
    return out


def conllu_text(sents, first_id=0):
    """CoNLL-U of the sentences, with comments and now and then a multiword token."""
    blocks = []
    for k, sent in enumerate(sents):
        lines = [f"# sent_id = s{first_id + k}", f"# text = {' '.join(w for w, _ in sent)}"]
        if k % 7 == 0:
            lines.append(f"1-2\t{sent[0][0]}{sent[1][0]}\t_\t_\t_\t_\t_\t_\t_\t_")
        for i, (form, tag) in enumerate(sent, start=1):
            lines.append(f"{i}\t{form}\t{form}\t{tag}\t_\t_\t{0 if i == 1 else 1}\tdep\t_\t_")
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)  # no blank line after the last sentence: allowed


def run_example(*args, timeout=240, cwd=None):
    return example_run.run_example(EXAMPLE, [*map(str, args)], cwd, timeout=timeout)


def parse_result(stdout):
    lines = stdout.strip().splitlines()
    match = RESULT.match(lines[-1])
    assert match, f"the last line is not a RESULT line: {lines[-1]!r}"
    return float(match.group(1)), float(match.group(2))


SMALL = ["--epochs", 30, "--hidden", 16, "--embed", 8, "--batch-size", 8, "--min-count", 1]


def test_one_file_learns_the_tags(tmp_path):
    data = sentences(80, seed=1)
    path = tmp_path / "toy.conllu"
    path.write_text(conllu_text(data), encoding="utf-8")
    done = run_example("--data", path, "--out", tmp_path / "out", *SMALL, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    accuracy, seconds = parse_result(done.stdout)
    for saved in ("tagging.npz", "tagging_words.json", "tagging_tags.json"):
        assert (tmp_path / "out" / saved).is_file(), saved
    tags = [tag for sent in data for _, tag in sent]
    majority = max(tags.count(t) for t in set(tags)) / len(tags)
    assert majority < 0.35  # 6 tags: a tagger that learned nothing stays near this
    assert accuracy > 0.85, done.stdout
    assert seconds > 0
    assert "64 / 8 / 8 sentences (train / dev / test)" in done.stdout  # the 80/10/10 split
    assert re.search(r"test accuracy \d\.\d{4} on \d+ words", done.stdout)


def test_a_gated_cell_learns_the_tags(tmp_path):
    """--cell gru: a bidirectional GRU in the RNN's place reads the context "saw" needs."""
    path = tmp_path / "toy.conllu"
    path.write_text(conllu_text(sentences(80, seed=1)), encoding="utf-8")
    done = run_example(
        "--data", path, "--out", tmp_path / "out", *SMALL, "--cell", "gru", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert parse_result(done.stdout)[0] > 0.85, done.stdout


def test_treebank_folder(tmp_path):
    for split, n, seed in (("train", 60, 2), ("dev", 10, 3), ("test", 12, 4)):
        (tmp_path / f"xx_toy-ud-{split}.conllu").write_text(
            conllu_text(sentences(n, seed)), encoding="utf-8"
        )
    (tmp_path / "README.md").write_text("not data\n", encoding="utf-8")
    done = run_example("--data", tmp_path, *SMALL, cwd=tmp_path)  # --out: ./rnnfast-out
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "rnnfast-out" / "tagging.npz").is_file()
    assert "60 / 10 / 12 sentences" in done.stdout
    assert parse_result(done.stdout)[0] > 0.85


def test_help_shows_each_option_and_default():
    done = run_example("--help", timeout=60)
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    for option, default in (
        ("--epochs", 10),
        ("--hidden", 128),
        ("--embed", 100),
        ("--batch-size", 32),
        ("--seed", 0),
        ("--min-count", 2),
    ):
        assert re.search(rf"{option} \S+ [^-]+\(default: {default}\)", text), option
    assert "--data DATA a UD treebank folder" in text


@pytest.mark.parametrize(
    "layout, message",
    [
        (
            "missing",
            r"data does not exist; expected a CoNLL-U file or a folder holding "
            r"\*-ud-train\.conllu",
        ),
        (
            "empty-folder",
            r"expected one \*-ud-train\.conllu in the folder .*data, found 0 \(none\)",
        ),
        ("no-test", r"expected one \*-ud-test\.conllu in the folder"),
        (
            "two-train",
            r"expected one \*-ud-train\.conllu in the folder .*data, found 2 "
            r"\(a-ud-train\.conllu, b-ud-train\.conllu\)",
        ),
        ("malformed", r"bad\.conllu, line 2: expected 10 tab-separated fields"),
        ("one-sentence", r"holds 1 sentence\(s\), too few to split"),
    ],
)
def test_bad_data_is_a_clear_error(tmp_path, layout, message):
    data = tmp_path / "data"
    files = {
        "empty-folder": [],
        "no-test": ["x-ud-train.conllu", "x-ud-dev.conllu"],
        "two-train": ["a-ud-train.conllu", "b-ud-train.conllu", "a-ud-test.conllu"],
    }
    if layout == "malformed":
        data = tmp_path / "bad.conllu"
        data.write_text("# sent_id = s0\n1\tword\tNOUN\n", encoding="utf-8")
    elif layout == "one-sentence":
        data = tmp_path / "one.conllu"
        data.write_text(conllu_text(sentences(1, 0)), encoding="utf-8")
    elif layout in files:
        data.mkdir()
        for name in files[layout]:
            (data / name).write_text(conllu_text(sentences(3, 0)), encoding="utf-8")
    done = run_example("--data", data, "--epochs", 1, "--out", tmp_path / "out", timeout=60)
    assert done.returncode == 2, done.stderr  # argparse's status for a usage error
    assert done.stderr.count("\n") == 1 and done.stderr.endswith("\n"), done.stderr  # one line
    assert re.match(r"tagging\.py: error: --data: (.*)?" + message, done.stderr), done.stderr
