"""rnnfast.load on hostile .npz files: each is refused with a ValueError before anything larger
than the file is allocated (issue 27, untrusted files)."""

from __future__ import annotations

import io
import json
import struct
import zipfile

import numpy as np
import pytest

import rnnfast
from rnnfast.nn.files import _file_format


def _npy(descr, shape, data, fortran=False):
    """The bytes of an .npy member whose header says what we choose, whatever ``data`` is."""
    header = f"{{'descr': {descr!r}, 'fortran_order': {fortran}, 'shape': {shape!r}, }}"
    header = header.encode("latin1")
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + data


def _zip(members, compression=zipfile.ZIP_STORED):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def _saved_members(layer):
    buf = io.BytesIO()
    rnnfast.save(layer, buf)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as archive:
        return {i.filename: archive.read(i) for i in archive.infolist()}


def _npy_of(array):
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


@pytest.fixture
def members():
    return _saved_members(rnnfast.RNN(2, 3, seed=0))


def _load(tmp_path, data, match):
    path = tmp_path / "hostile.npz"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=match):
        rnnfast.load(path)


def _with_config(members, text):
    return {**members, "__rnnfast_config__.npy": _npy_of(np.frombuffer(text, np.uint8))}


def test_header_claiming_2_to_the_40_elements(tmp_path, members):
    # np.load allocates 4 TiB for this before it finds the data missing
    members["weight_hh_l0.npy"] = _npy("<f4", (1 << 40,), b"\0" * 36)
    _load(tmp_path, _zip(members), r"claims shape \(1099511627776,\)")


def test_header_claiming_more_than_the_member(tmp_path, members):
    members["weight_hh_l0.npy"] = _npy("<f4", (3, 4), b"\0" * 36)
    _load(tmp_path, _zip(members), r"holds 36")


def test_object_dtype(tmp_path, members):
    members["weight_hh_l0.npy"] = _npy("|O", (1,), b"\0" * 8)
    _load(tmp_path, _zip(members), "dtype object")


@pytest.mark.parametrize("descr", [[("a", "<f4")], "(3,)<f4", "<M8[s]"], ids=str)
def test_structured_subarray_and_datetime_dtypes(tmp_path, members, descr):
    members["weight_hh_l0.npy"] = _npy(descr, (3,), b"\0" * 36)
    _load(tmp_path, _zip(members), "structured dtype|dtype")


@pytest.mark.parametrize(
    "shape, fortran",
    [((-1,), False), ((3.0,), False), ("3", False), ((3,), 1)],
    ids=["negative", "float", "str", "fortran-int"],
)
def test_malformed_header_fields(tmp_path, members, shape, fortran):
    members["weight_hh_l0.npy"] = _npy("<f4", shape, b"\0" * 12, fortran)
    _load(tmp_path, _zip(members), "shape|fortran_order")


def test_stored_member_whose_sizes_disagree(tmp_path, members):
    data = bytearray(_zip(members))
    central = data.find(b"PK\x01\x02")
    data[central + 24 : central + 28] = struct.pack("<I", 1 << 31)  # its uncompressed size
    _load(tmp_path, bytes(data), "two different sizes")


def test_deflated_member_claiming_more_than_deflate_gives(tmp_path, members):
    data = bytearray(_zip(members, zipfile.ZIP_DEFLATED))
    central = data.find(b"PK\x01\x02")
    data[central + 24 : central + 28] = struct.pack("<I", 0xFFFFFFF0)
    _load(tmp_path, bytes(data), "more than deflate gives")


def test_members_claiming_more_bytes_than_the_file(tmp_path, members):
    data = bytearray(_zip(members))
    central = data.find(b"PK\x01\x02")
    for offset in (20, 24):  # compressed and uncompressed size, equal (stored)
        data[central + offset : central + offset + 4] = struct.pack("<I", 1 << 30)
    _load(tmp_path, bytes(data), "more bytes than the file has")


def test_encrypted_member(tmp_path, members):
    data = bytearray(_zip(members))
    central = data.find(b"PK\x01\x02")
    data[central + 8] |= 0x1
    _load(tmp_path, bytes(data), "encrypted")


def test_member_that_is_not_npy(tmp_path, members):
    members["notes.txt"] = b"hello"
    _load(tmp_path, _zip(members), "not an .npy array")


def test_deeply_nested_config(tmp_path, members):
    text = b'{"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    _load(tmp_path, _zip(_with_config(members, text)), "nested 100001 deep")


def test_enormous_config(tmp_path, members, monkeypatch):
    monkeypatch.setattr(_file_format, "MAX_CONFIG_BYTES", 1000)
    text = json.dumps({"input_size": 2, "hidden_size": 3, "pad": "x" * 2000}).encode()
    _load(tmp_path, _zip(_with_config(members, text)), "more than the 1,000 read")


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_in_config(tmp_path, members, constant):
    text = b'{"input_size": 2, "hidden_size": 3, "alpha": ' + constant.encode() + b"}"
    _load(tmp_path, _zip(_with_config(members, text)), "no NaN or infinite")


@pytest.mark.parametrize(
    "key, value, match",
    [
        ("hidden_size", 1 << 40, "larger than any dimension"),
        ("input_size", 100_000, "larger than any dimension"),
        ("num_layers", 1 << 30, "layers, more than"),
    ],
)
def test_config_sizes_the_file_cannot_hold(tmp_path, members, key, value, match):
    # refused before the layer is built: RNN(2, 2**40) would allocate its weights first
    config = {"input_size": 2, "hidden_size": 3, key: value}
    _load(tmp_path, _zip(_with_config(members, json.dumps(config).encode())), match)


def test_nested_config_sizes_are_checked(tmp_path):
    members = _saved_members(
        rnnfast.Sequential([rnnfast.nn.Linear(2, 3, seed=0), rnnfast.nn.Linear(3, 2, seed=0)])
    )
    raw = members["__rnnfast_config__.npy"]
    config = json.loads(np.load(io.BytesIO(raw)).tobytes())
    config["layers"][1]["out_features"] = 1 << 40
    text = json.dumps(config).encode()
    _load(tmp_path, _zip(_with_config(members, text)), r"\['layers'\]\[1\]\['out_features'\]")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -1.0])
def test_int8_scales_not_finite_or_negative(tmp_path, bad):
    members = _saved_members(rnnfast.quantize(rnnfast.nn.Linear(3, 2, seed=0), "int8"))
    name = next(k for k in members if k.endswith("_scale.npy"))
    scale = np.load(io.BytesIO(members[name])).copy()
    scale[0] = bad
    members[name] = _npy_of(scale)
    _load(tmp_path, _zip(members), "int8 scales are finite and >= 0")


def test_valid_file_still_loads(tmp_path, members):
    path = tmp_path / "ok.npz"
    path.write_bytes(_zip(members))
    layer = rnnfast.load(path)
    assert layer.hidden_size == 3
    assert np.array_equal(
        layer.state_dict()["weight_hh_l0"],
        np.load(io.BytesIO(members["weight_hh_l0.npy"])),
    )


def test_fortran_order_member_loads_as_numpy_reads_it(tmp_path, members):
    weight = np.load(io.BytesIO(members["weight_ih_l0.npy"]))
    members["weight_ih_l0.npy"] = _npy_of(np.asfortranarray(weight))
    path = tmp_path / "fortran.npz"
    path.write_bytes(_zip(members))
    assert np.array_equal(rnnfast.load(path).state_dict()["weight_ih_l0"], weight)


def test_directory_offset_outside_the_file(tmp_path):
    # zipfile seeks before the file's start for this one (OSError EINVAL, found by
    # tools/fuzz_api.py): a damaged file, a ValueError
    members = _saved_members(rnnfast.RNN(3, 4, num_layers=2, bidirectional=True, seed=0))
    data = bytearray(_zip(members))
    end = data.rfind(b"PK\x05\x06")
    data[end + 18] = 133  # the third byte of the central directory's offset
    _load(tmp_path, bytes(data), "an offset outside the file")
