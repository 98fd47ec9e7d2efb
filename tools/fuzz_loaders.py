#!/usr/bin/env python3
"""Mutation fuzzing of rnnfast's loaders of untrusted files.

Each loader is run in this process on mutations of small valid seed files, made with a seeded
RNG (bit flips, interesting bytes, byte inserts and deletes, truncation, duplicated chunks,
splices with another seed, and edits of each format's header fields: .npy headers and zip
sizes, the JSON config (field by field: every size, count, dilation and option of every saved
class set to huge, negative, zero, fractional or mistyped values), ONNX dims, attributes and
external data, CoNLL-U IDs and tabs):

  npz       rnnfast.load                  (a file of every saved class: RNN (dilated,
                                           stateful), GRU, LSTM, DeepTransitionRNN, JordanRNN,
                                           the cells, Linear, Embedding, Dropout, Sequential,
                                           Seq2Seq, bf16 and int8 copies; a loaded recurrent
                                           layer is also called once and stepped)
  onnx      rnnfast.onnx.load             (exported RNN, and Embedding + GRU / LSTM + Linear)
  keras     rnnfast.keras.load_model      (.keras files of the Keras front's models: every
                                           layer class it saves, stateful with a batch size,
                                           compiled; config.json edited field by field, the
                                           weights file's datasets reshaped, retyped or
                                           removed; a loaded model also predicts once)
  vocab     rnnfast.data.Vocabulary.load
  conllu    rnnfast.data.read_conllu
  datasets  rnnfast.datasets.load         (sunspots and names read from a root folder, and
                                           sunspots from the cache)

A loader may refuse an input with ValueError (its documented error) or OSError (the file
system's); a call of a loaded layer on a small input may refuse it with ValueError or TypeError.
Anything else is a crash, MemoryError and RecursionError included, and so is an
execution that runs past ``--timeout`` seconds; each crashing input is written to
``--crashes/<loader>-<execution>.bin`` with a ``.txt`` beside it (the traceback). The address
space is capped (``--memory-gib``, 4 GiB by default) so that an allocation a header or a config
asks for fails as a MemoryError, a crash, rather than swapping.

    python tools/fuzz_loaders.py --loader all --runs 100000 --seed 0 --crashes fuzz-crashes
    python tools/fuzz_loaders.py --replay onnx fuzz-crashes/onnx-123.bin
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import re
import resource
import signal
import sys
import tempfile
import time
import traceback
import warnings
import zipfile
from pathlib import Path

import numpy as np

import rnnfast
from rnnfast import datasets
from rnnfast.data import Vocabulary, read_conllu

ALLOWED = (ValueError, OSError)
LOADERS = ("npz", "onnx", "keras", "vocab", "conllu", "datasets")


class Timeout(Exception):
    """An execution that ran past the time limit (a hang is a finding)."""


# ---- seeds -------------------------------------------------------------------------------------


def _npz_seeds():
    out = []
    nn = rnnfast.nn
    layers = [
        rnnfast.RNN(2, 3, seed=0),
        rnnfast.RNN(2, 3, num_layers=2, dilation=[1, 4], stateful=True, seed=0),
        nn.GRU(2, 3, bidirectional=True, seed=0),
        nn.LSTM(2, 3, proj_size=2, dilation=3, seed=0),
        nn.DeepTransitionRNN(2, 3, transition_layers=2, seed=0),
        nn.JordanRNN(2, 3, 2, seed=0),
        nn.GRUCell(2, 3, seed=0),
        nn.LSTMCell(2, 3, seed=0),
        nn.Embedding(5, 2, padding_idx=0, seed=0),
        nn.Dropout(0.25),
        nn.Seq2Seq(5, 4, embed_dim=2, hidden_size=3, context="both", seed=0),
        rnnfast.quantize(nn.Linear(3, 2, seed=0), "int8"),
        rnnfast.quantize(nn.GRU(2, 3, seed=0), "bf16"),
        rnnfast.quantize(rnnfast.RNN(2, 3, dilation=2, seed=0), "int8"),
        rnnfast.Sequential(
            [
                nn.Embedding(5, 2, seed=0),
                nn.LSTM(2, 3, seed=0),
                nn.Linear(3, 2, seed=0),
            ]
        ),
    ]
    for layer in layers:
        buf = io.BytesIO()
        rnnfast.save(layer, buf)
        out.append(buf.getvalue())
    return out


def _onnx_seeds():
    import rnnfast.onnx

    out = []
    rnn = rnnfast.RNN(2, 3, seed=0).eval()
    gated = rnnfast.Sequential(
        [
            rnnfast.nn.Embedding(5, 2, seed=0),
            rnnfast.nn.GRU(2, 3, seed=0),
            rnnfast.nn.Linear(3, 2, seed=0),
        ]
    ).eval()
    lstm = rnnfast.nn.LSTM(2, 3, bidirectional=True, seed=0).eval()
    for model in (rnn, gated, lstm):
        out.append(rnnfast.onnx.export(model, None).SerializeToString())
    return out


def _keras_models():
    """Small models of the Keras front, one or more of every layer class it saves."""
    import rnnfast.keras as rk

    def model(*layers, **compile_args):
        m = rk.Sequential(list(layers))
        if compile_args:
            m.compile(**compile_args)
        return m

    return [
        model(rk.Input((4, 2)), rk.SimpleRNN(3, seed=0), rk.Dense(2, seed=0)),
        model(
            rk.Input((None, 2)),
            rk.GRU(3, reset_after=False, return_sequences=True, seed=0),
            rk.LSTM(3, unroll=True, use_cudnn=False, implementation=1, seed=0),
            rk.Dropout(0.25),
            rk.Dense(2, activation="softmax", seed=0),
            optimizer="adam",
            loss="sparse_categorical_crossentropy",
            metrics=["accuracy"],
        ),
        model(
            rk.Input((5,), dtype="int64"),
            rk.Embedding(6, 2, mask_zero=True, embeddings_initializer="glorot_uniform", seed=0),
            rk.Bidirectional(rk.LSTM(3, return_sequences=True, seed=0)),
            rk.TimeDistributed(rk.Dense(2, seed=0)),
        ),
        model(
            rk.Input(batch_shape=(2, 3, 2)),
            rk.Masking(0.0),
            rk.GRU(3, stateful=True, zero_output_for_mask=True, seed=0),
            optimizer="sgd",
            loss="mse",
        ),
    ]


def _keras_seeds(folder):
    out = []
    for i, model in enumerate(_keras_models()):
        path = folder / f"seed-{i}.keras"
        model.save(path)
        out.append(path.read_bytes())
    return out


def _vocab_seeds(folder):
    vocab = Vocabulary.build([["a", "b", "a"], ["c", "d\u00e9"]])
    path = folder / "seed-vocab.json"
    vocab.save(path)
    return [path.read_bytes()]


_CONLLU = (
    "# sent_id = 1\n# text = Hi there\n"
    "1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n"
    "2\tthere\tthere\tADV\tRB\t_\t1\tadvmod\t_\t_\n\n"
    "1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n1\tdo\tdo\tAUX\tVBP\t_\t0\troot\t_\t_\n"
    "2\tn't\tnot\tPART\tRB\t_\t1\tadvmod\t_\t_\n2.1\tx\tx\tX\tX\t_\t_\t_\t1:dep\t_\n"
)

_SUNSPOTS = (
    "   MONTHLY MEAN SUNSPOT NUMBERS\n=====\nYear    Jan   Feb   Mar   Apr   May   Jun   Jul   Aug"
    "   Sep   Oct   Nov   Dec\n-----\n"
    "1749    58.0  62.6  70.0  55.7  85.0  83.5  94.8  66.3  75.9  75.5 158.6  85.2\n"
    "1750    73.3  75.9  89.2  88.3  90.0 100.0  85.4 103.0  91.2  65.7  63.3  75.4\n\n"
    "1751    70.0  43.5\n"
)


def seeds(loader, folder):
    """The seed files (bytes) of ``loader``."""
    if loader == "npz":
        return _npz_seeds()
    if loader == "onnx":
        return _onnx_seeds()
    if loader == "keras":
        return _keras_seeds(folder)
    if loader == "vocab":
        return _vocab_seeds(folder)
    if loader == "conllu":
        return [_CONLLU.encode("utf-8"), ("\ufeff" + _CONLLU).encode("utf-8")]
    return [_SUNSPOTS.encode("ascii"), "Abe\nB\u00e9la\n\nCz\n".encode("utf-8")]


# ---- mutations ---------------------------------------------------------------------------------

_INTERESTING = [0, 1, 0x7F, 0x80, 0xFF, 0x0A, 0x09, 0x22, 0x5B, 0x7B]
_BIG = [b"1099511627776", b"4294967295", b"-1", b"0", b"99999", b"2147483648", b"1e308", b"NaN"]


def _flip(rng, data):
    data = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8)
    return bytes(data)


def _set_byte(rng, data):
    data = bytearray(data)
    data[rng.randrange(len(data))] = rng.choice(_INTERESTING + [rng.randrange(256)])
    return bytes(data)


def _insert(rng, data):
    i = rng.randrange(len(data) + 1)
    return data[:i] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 16))) + data[i:]


def _delete(rng, data):
    i = rng.randrange(len(data))
    return data[:i] + data[i + rng.randint(1, 32) :]


def _truncate(rng, data):
    return data[: rng.randrange(len(data))]


def _duplicate(rng, data):
    i = rng.randrange(len(data))
    j = min(len(data), i + rng.randint(1, 64))
    k = rng.randrange(len(data) + 1)
    return data[:k] + data[i:j] + data[k:]


def _splice(rng, data, others):
    other = rng.choice(others)
    i, j = rng.randrange(len(data) + 1), rng.randrange(len(other) + 1)
    return data[:i] + other[j:]


def _numbers(rng, data):
    """A decimal number in the text (a JSON field, an .npy shape) made huge, negative, zero,
    a float or NaN."""
    found = list(re.finditer(rb"\d+", data))
    if not found:
        return _flip(rng, data)
    m = rng.choice(found)
    return data[: m.start()] + rng.choice(_BIG) + data[m.end() :]


def _npy_header(rng, data):
    """An .npy header's dtype, order or shape edited (the zip's CRC left as it was, so some
    edits are caught there and some by the header's own check)."""
    edits = [
        (rb"'descr': '[^']*'", [b"'descr': '|O'", b"'descr': '<V8'", b"'descr': [('a', '<f4')]"]),
        (rb"'descr': '[^']*'", [b"'descr': '(2,)<f4'", b"'descr': '<M8[s]'", b"'descr': 5"]),
        (rb"'fortran_order': \w+", [b"'fortran_order': True", b"'fortran_order': 1"]),
        (rb"'shape': \([^)]*\)", [b"'shape': (1099511627776,)", b"'shape': (-1,)"]),
        (rb"'shape': \([^)]*\)", [b"'shape': (65536, 65536)", b"'shape': ((((((1,),),),),),)"]),
    ]
    pattern, replacements = rng.choice(edits)
    found = list(re.finditer(pattern, data))
    if not found:
        return _numbers(rng, data)
    m = rng.choice(found)
    return data[: m.start()] + rng.choice(replacements) + data[m.end() :]


def _zip_sizes(rng, data):
    """A zip header's size, offset or count field set to another value."""
    data = bytearray(data)
    heads = [m.start() for m in re.finditer(rb"PK\x01\x02|PK\x03\x04|PK\x05\x06", data)]
    if not heads:
        return _flip(rng, bytes(data))
    at = rng.choice(heads)
    field = at + rng.choice([8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 34, 42])
    if field + 4 <= len(data):
        value = rng.choice([0, 1, 0xFFFFFFFF, 0x7FFFFFFF, rng.randrange(1 << 32)])
        data[field : field + 4] = value.to_bytes(4, "little")
    return bytes(data)


def _read_archive(data):
    """The members of a zip archive's bytes, by name."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist()}


def _write_archive(members):
    """A zip archive (bytes, CRCs right) of ``members`` by name."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for key, value in members.items():
            archive.writestr(key, value)
    return out.getvalue()


def _npz_member(rng, data):
    """One member of the archive edited (its .npy header, its JSON or its bytes) and the
    archive written again, CRCs right: the edit reaches the reader's checks past zip's."""
    members = _read_archive(data)
    name = rng.choice(sorted(members))
    edit = rng.choice([_npy_header, _npy_header, _json_fields, _numbers, _flip, _truncate])
    members[name] = edit(rng, members[name])
    return _write_archive(members)


# what a config field is set to: sizes far past any array, the bounds' edges, nonsense types
_FIELD_VALUES = [
    0, -1, 1, 2, 3, 7, 2**31, 2**31 + 1, 2**40, 2**63, 10**30, 0.5, 1e308, -1e308, True, None,
    "x", "", [], [1], [2**40], [1, 2**40], {}, {"a": 1},
]  # fmt: skip


def _config_of(data):
    """The JSON config held by an .npz config member's bytes (a uint8 .npy), or None."""
    try:
        raw = np.load(io.BytesIO(data), allow_pickle=False)
        return json.loads(raw.tobytes().decode("utf-8"))
    except (ValueError, OSError, UnicodeDecodeError, EOFError):
        return None


def _config_member(config):
    out = io.BytesIO()
    np.save(out, np.frombuffer(json.dumps(config).encode("utf-8"), dtype=np.uint8))
    return out.getvalue()


def _fields(config):
    """Every (container, key or index) of a JSON config, nested layers' fields included."""
    found = []

    def walk(node):
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            found.append((node, key))
            if isinstance(value, (dict, list)):
                walk(value)

    if isinstance(config, (dict, list)):
        walk(config)
    return found


def _config_field(rng, data):
    """One field of a saved layer's JSON config (an .npz member's bytes, the fields of the
    layers nested in a container's included) set to another value: what a hostile file could
    claim that no array carries, or that disagrees with the arrays."""
    config = _config_of(data)
    fields = _fields(config)
    if not fields:
        return _numbers(rng, data)
    node, key = rng.choice(fields)
    value = rng.choice(_FIELD_VALUES)
    if rng.random() < 0.3 and type(node[key]) is int:
        value = node[key] * rng.choice([2, 3, 1 << 10, 1 << 31, -1]) + rng.choice([0, 1, -1])
    node[key] = value
    return _config_member(config)


def config_field_cases(seed_file, values=None):
    """Every field of a seed file's config set to each of ``values`` (by default the hostile
    sizes and types of ``_FIELD_VALUES``), one at a time: ``[(path, value, file bytes)]``, the
    field by field sweep of a saved class."""
    values = _FIELD_VALUES if values is None else values
    members = _read_archive(seed_file)
    name = "__rnnfast_config__.npy"
    count = len(_fields(_config_of(members[name])))
    cases = []
    for i in range(count):
        for value in values:
            config = _config_of(members[name])
            node, key = _fields(config)[i]
            node[key] = value
            edited = _write_archive({**members, name: _config_member(config)})
            cases.append((f"{key!r}", value, edited))
    return cases


def _npz_config(rng, data):
    """The archive's config member edited field by field (:func:`_config_field`), the archive
    written again with its CRCs right."""
    members = _read_archive(data)
    name = "__rnnfast_config__.npy"
    if name not in members:
        return _npz_member(rng, data)
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        members[name] = _config_field(rng, members[name])
    return _write_archive(members)


_KERAS_CONFIG = "config.json"


def _keras_config(rng, data):
    """One to three fields of a .keras file's config.json (nested layers' included) set to
    another value (:data:`_FIELD_VALUES`, or an int field scaled), the archive written again
    with its CRCs right."""
    members = _read_archive(data)
    if _KERAS_CONFIG not in members:
        return _zip_sizes(rng, data)
    config = json.loads(members[_KERAS_CONFIG])
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        fields = _fields(config)
        if not fields:
            break
        node, key = rng.choice(fields)
        value = rng.choice(_FIELD_VALUES)
        if rng.random() < 0.3 and type(node[key]) is int:
            value = node[key] * rng.choice([2, 3, 1 << 10, 1 << 31, -1]) + rng.choice([0, 1, -1])
        node[key] = value
    members[_KERAS_CONFIG] = json.dumps(config).encode("utf-8")
    return _write_archive(members)


def _keras_weights(rng, data):
    """One dataset of a .keras file's weights file reshaped (a size huge and unstored: HDF5
    reads unwritten data as zeros), retyped, made a group or removed."""
    import h5py

    members = _read_archive(data)
    name = "model.weights.h5"
    if name not in members:
        return _zip_sizes(rng, data)
    buffer = io.BytesIO(members[name])
    with h5py.File(buffer, "r+") as handle:
        found = []
        handle.visititems(lambda p, o: found.append(p) if isinstance(o, h5py.Dataset) else None)
        if found:
            path = rng.choice(found)
            shape, dtype = handle[path].shape, handle[path].dtype
            del handle[path]
            choice = rng.randrange(5)
            if choice == 0 and shape:
                shape = list(shape)
                shape[rng.randrange(len(shape))] = rng.choice([0, 1, 7, 1 << 20, 1 << 31])
                handle.create_dataset(path, shape=tuple(shape), dtype=dtype)
            elif choice == 1:
                kind = rng.choice(["i8", "u1", "f2", "c16", h5py.string_dtype()])
                handle.create_dataset(path, shape=shape, dtype=kind)
            elif choice == 2:
                handle.create_group(path)
            elif choice == 3:
                big = rng.choice([(1 << 40,), (1 << 20, 1 << 20), (65536, 65536, 2)])
                handle.create_dataset(path, shape=big, dtype=dtype, chunks=True)
    members[name] = buffer.getvalue()
    return _write_archive(members)


def keras_config_cases(seed_file, values=None):
    """Every field of a .keras seed file's config.json set to each of ``values`` (by default
    :data:`_FIELD_VALUES`), one at a time: ``[(path, value, file bytes)]``."""
    values = _FIELD_VALUES if values is None else values
    members = _read_archive(seed_file)
    count = len(_fields(json.loads(members[_KERAS_CONFIG])))
    cases = []
    for i in range(count):
        for value in values:
            config = json.loads(members[_KERAS_CONFIG])
            node, key = _fields(config)[i]
            node[key] = value
            edited = {**members, _KERAS_CONFIG: json.dumps(config).encode("utf-8")}
            cases.append((f"{key!r}", value, _write_archive(edited)))
    return cases


def _json_fields(rng, data):
    """The JSON made deep, NaN-valued, or with a field of another type."""
    choice = rng.randrange(4)
    i = data.find(b"{")
    if i < 0:
        return _numbers(rng, data)
    if choice == 0:
        depth = rng.choice([50, 100, 5000, 100000])
        return data[: i + 1] + b'"deep": ' + b"[" * depth + b"]" * depth + b", " + data[i + 1 :]
    if choice == 1:
        return data[: i + 1] + rng.choice([b'"x": NaN, ', b'"x": -Infinity, ']) + data[i + 1 :]
    if choice == 2:
        return re.sub(rb'": ("[^"]*"|\d+|null|true|false)', lambda m: b'": [1]', data, count=1)
    return _numbers(rng, data)


def _onnx_fields(rng, data):
    """A tensor's dims or type, an RNN attribute, or external data edited in the parsed
    model."""
    import onnx

    model = onnx.ModelProto()
    model.ParseFromString(data)
    graph = model.graph
    choice = rng.randrange(6)
    inits = list(graph.initializer)
    if choice == 0 and inits:
        t = rng.choice(inits)
        if t.dims:
            t.dims[rng.randrange(len(t.dims))] = rng.choice([0, 1, 2, 7, 1 << 20, 1 << 40])
    elif choice == 1 and inits:
        t = rng.choice(inits)
        t.data_type = rng.choice([0, 2, 6, 8, 11, 14, 16, 99])
    elif choice == 2 and inits:
        t = rng.choice(inits)
        t.data_location = onnx.TensorProto.EXTERNAL
        loc = rng.choice(["../../etc/passwd", "/etc/passwd", "weights.bin", "", "a/../../x"])
        del t.external_data[:]
        for key, value in (("location", loc), ("offset", rng.choice(["0", "-8", "x", "9" * 30]))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        t.ClearField("raw_data")
    elif choice == 3:
        nodes = [n for n in graph.node if n.op_type in ("RNN", "GRU", "LSTM")] or list(graph.node)
        if nodes:
            node = rng.choice(nodes)
            attr = node.attribute.add()
            name = rng.choice(["hidden_size", "direction", "layout", "activations", "clip", "axis"])
            attr.name = name
            if name in ("direction", "activations"):
                attr.type = onnx.AttributeProto.STRING
                attr.s = rng.choice([b"forward", b"sideways", b"\xff", b""])
            else:
                attr.type = onnx.AttributeProto.INT
                attr.i = rng.choice([0, 1, -1, 3, 1 << 40])
    elif choice == 4 and inits:
        t = rng.choice(inits)
        raw = t.raw_data
        t.raw_data = raw[: rng.randrange(len(raw) + 1)] if raw else b"\x00" * 4
    else:
        nodes = list(graph.node)
        if nodes:
            node = rng.choice(nodes)
            if node.input and rng.random() < 0.5:
                node.input[rng.randrange(len(node.input))] = rng.choice(["", "nope", "x"])
            else:
                node.op_type = rng.choice(["Add", "Tile", "ConstantOfShape", "Loop", "Range"])
    return model.SerializeToString()


def _conllu_lines(rng, data):
    """A CoNLL-U line with a field or tab removed, an ID changed or bytes that are not UTF-8."""
    lines = data.split(b"\n")
    i = rng.randrange(len(lines))
    edits = [
        lambda s: s.replace(b"\t", b" ", 1),
        lambda s: s + b"\t_",
        lambda s: re.sub(rb"^\d+", lambda m: rng.choice([b"0", b"7", b"1-", b"a", b"1.x"]), s),
        lambda s: s[:3] + b"\xff\xfe" + s[3:],
        lambda s: s.replace(b"\t_", b"\t", 1),
    ]
    lines[i] = rng.choice(edits)(lines[i])
    return b"\n".join(lines)


_FORMAT_EDITS = {
    "npz": [_npz_member, _npz_member, _npz_member, _npy_header, _zip_sizes, _numbers]
    + [_npz_config] * 6,
    "onnx": [_onnx_fields],
    "keras": [_keras_config] * 6 + [_keras_weights] * 2 + [_zip_sizes, _numbers],
    "vocab": [_json_fields, _numbers],
    "conllu": [_conllu_lines],
    "datasets": [_numbers],
}


# how often a mutation is a format edit rather than a generic byte edit: a .keras file is a zip
# whose CRCs catch nearly every byte edit, so its config and datasets get most of the edits
_FORMAT_SHARE = {"keras": 0.85}


def mutate(rng, loader, seed_files):
    """One input: a seed with 1 to 3 mutations (a format edit half of the time, or
    :data:`_FORMAT_SHARE`)."""
    data = rng.choice(seed_files)
    generic = [_flip, _set_byte, _insert, _delete, _truncate, _duplicate]
    for _ in range(rng.randint(1, 3)):
        if not data:
            data = rng.choice(seed_files)
        if rng.random() < _FORMAT_SHARE.get(loader, 0.5):
            edit = rng.choice(_FORMAT_EDITS[loader])
            try:
                data = edit(rng, data)
            except Exception:  # a format edit of an input that no longer parses as the format
                data = _flip(rng, data)
        elif rng.random() < 0.1:
            data = _splice(rng, data, seed_files)
        else:
            data = rng.choice(generic)(rng, data)
    return data


# ---- running the loaders -----------------------------------------------------------------------


class Runner:
    """Runs one loader on inputs, in this process, in a scratch folder."""

    def __init__(self, loader, folder):
        self.loader = loader
        self.folder = Path(folder)
        self.root = self.folder / "root"
        (self.root / "sunspots").mkdir(parents=True, exist_ok=True)
        (self.root / "names").mkdir(parents=True, exist_ok=True)
        self.cache = self.folder / "cache"
        (self.cache / "rnnfast" / "sunspots").mkdir(parents=True, exist_ok=True)
        self.turn = 0

    def __call__(self, data):
        loader = self.loader
        if loader == "npz":
            _exercise(rnnfast.load(io.BytesIO(data)))
        elif loader == "onnx":
            rnnfast.onnx.load(io.BytesIO(data))
        elif loader == "keras":
            from rnnfast.keras.models import load_model

            self.turn += 1
            path = self.folder / "model.keras"
            path.write_bytes(data)
            _predict(load_model(path, compile=bool(self.turn % 2)))
        elif loader == "vocab":
            path = self.folder / "vocab.json"
            path.write_bytes(data)
            Vocabulary.load(path)
        elif loader == "conllu":
            self.turn += 1
            if self.turn % 2:
                read_conllu(io.BytesIO(data))
            else:
                path = self.folder / "in.conllu"
                path.write_bytes(data)
                read_conllu(path)
        else:
            self.turn += 1
            which = self.turn % 3
            if which == 0:
                (self.root / "sunspots" / "sunspots_monthly.dat").write_bytes(data)
                datasets.load("sunspots", root=self.root, download=False)
            elif which == 1:
                (self.root / "names" / "Fuzz.txt").write_bytes(data)
                datasets.load("names", root=self.root / "names", download=False)
            else:
                (self.cache / "rnnfast" / "sunspots" / "sunspots_monthly.dat").write_bytes(data)
                old = os.environ.get("XDG_CACHE_HOME")
                os.environ["XDG_CACHE_HOME"] = str(self.cache)
                try:
                    datasets.load("sunspots", download=False)
                finally:
                    if old is None:
                        del os.environ["XDG_CACHE_HOME"]
                    else:
                        os.environ["XDG_CACHE_HOME"] = old


def _exercise(layer):
    """A loaded recurrent layer called once on 3 steps of a batch of one, then stepped once:
    a config's sizes that no array carries (a dilation) must not make a call allocate by them
    either. The call may refuse its input (ValueError, TypeError: a mutated option, such as
    Keras's return forms, may not take it); nothing else."""
    from rnnfast.nn.recurrent.rnn import RecurrentLayer

    if not isinstance(layer, RecurrentLayer):
        return
    layer.eval()
    x = np.zeros((3, 1, layer.input_size), dtype=layer.dtype)
    try:
        layer(x)
        layer.step(x[0])
    except (ValueError, TypeError):
        pass


def _predict(model):
    """A loaded Keras-front model predicts once on a small batch of zeros (its fixed batch
    size, 3 steps where the length is free); it may refuse the input (ValueError,
    TypeError), nothing else. A model whose fixed input is large is not called."""
    shape = list(model._input_shape)
    shape[0] = 1 if shape[0] is None else shape[0]
    if len(shape) > 1 and shape[1] is None:
        shape[1] = 3
    if any(s is None for s in shape) or np.prod(shape) > 1 << 16:
        return
    ids = getattr(model.layers[0], "reads_ids", False)
    x = np.zeros(shape, dtype=np.int64 if ids else np.float32)
    try:
        model.predict(x, batch_size=shape[0])
    except (ValueError, TypeError):
        pass


@contextlib.contextmanager
def _time_limit(seconds):
    if not seconds or not hasattr(signal, "SIGALRM"):
        yield
        return

    def expire(signum, frame):
        raise Timeout(f"ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_one(runner, data, timeout=None):
    """``"loaded"`` or ``"refused"`` when the loader accepted or refused ``data`` as it may;
    else the crash's traceback text."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with np.errstate(all="ignore"), _time_limit(timeout):
                runner(data)
        except ALLOWED:
            return "refused"
        except BaseException as exc:  # every other exception is the finding we look for
            if isinstance(exc, KeyboardInterrupt):
                raise
            return "".join(traceback.format_exception(exc))
    return "loaded"


def fuzz(loader, runs, seed=0, crashes=None, timeout=None, progress=None):
    """Run ``loader`` on ``runs`` mutated inputs; ``(executions, crash count, kinds)`` where
    ``kinds`` counts the crashes by their last line, and the inputs loaded without error
    under ``"(loaded)"``."""
    rng = random.Random(f"{loader}-{seed}")
    kinds = {}
    loaded = 0
    with tempfile.TemporaryDirectory(prefix=f"fuzz-{loader}-") as scratch:
        seed_files = seeds(loader, Path(scratch))
        runner = Runner(loader, scratch)
        start = time.monotonic()
        for n in range(runs):
            data = mutate(rng, loader, seed_files)
            crash = run_one(runner, data, timeout)
            if crash == "loaded":
                loaded += 1
            elif crash != "refused":
                kind = crash.strip().splitlines()[-1][:200]
                kinds[kind] = kinds.get(kind, 0) + 1
                if crashes is not None:
                    Path(crashes).mkdir(parents=True, exist_ok=True)
                    Path(crashes, f"{loader}-{n}.bin").write_bytes(data)
                    Path(crashes, f"{loader}-{n}.txt").write_text(crash)
            if progress and (n + 1) % progress == 0:
                rate = (n + 1) / (time.monotonic() - start)
                print(
                    f"{loader}: {n + 1} executions, {sum(kinds.values())} crashes, {rate:.0f}/s",
                    flush=True,
                )
    return runs, sum(kinds.values()), {**kinds, "(loaded)": loaded}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loader", choices=LOADERS + ("all",), default="all")
    parser.add_argument("--runs", type=int, default=10000, help="executions per loader")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--crashes", default="fuzz-crashes", help="folder for crashing inputs")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per execution")
    parser.add_argument("--memory-gib", type=float, default=4.0, help="address space cap")
    parser.add_argument("--progress", type=int, default=10000)
    parser.add_argument("--replay", nargs=2, metavar=("LOADER", "FILE"))
    args = parser.parse_args(argv)
    if args.memory_gib:
        cap = int(args.memory_gib * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    if args.replay:
        loader, path = args.replay
        with tempfile.TemporaryDirectory() as scratch:
            outcome = run_one(Runner(loader, scratch), Path(path).read_bytes(), args.timeout)
        print(outcome)
        return 0 if outcome in ("loaded", "refused") else 1
    total = 0
    for loader in LOADERS if args.loader == "all" else (args.loader,):
        start = time.monotonic()
        runs, count, kinds = fuzz(
            loader, args.runs, args.seed, args.crashes, args.timeout, args.progress
        )
        total += count
        loaded = kinds.pop("(loaded)")
        print(
            f"{loader}: {runs} executions, {count} crashes, {loaded} loaded, "
            f"{time.monotonic() - start:.0f} s"
            + "".join(f"\n    {c} x {k}" for k, c in sorted(kinds.items(), key=lambda kc: -kc[1])),
            flush=True,
        )
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
