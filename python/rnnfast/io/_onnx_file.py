"""Reading an ONNX file that may be hostile, for ``rnnfast.io.onnx.load``: the protobuf parsed
from the file's bytes (a parse error is a ValueError naming the file), and every tensor in it
(initializers, ``Constant`` values) checked before the reader turns any into an array: a
numeric type, a shape whose size its data has, external data only from files inside the
model's folder (``onnx.load`` would open the files an external tensor names, wherever they are),
no subgraphs.
"""

from __future__ import annotations

import math
import os

__all__ = ["check_model", "parse_model"]

_MAX_NDIM = 32


def _typed_fields(TP):
    """Each numeric tensor type's (bytes per element, the repeated field holding its values
    when it has no raw_data), as onnx's TensorProto documents them."""
    small = "int32_data"  # the narrow types, and bool and float16, are held in int32_data
    return {
        TP.FLOAT: (4, "float_data"),
        TP.DOUBLE: (8, "double_data"),
        TP.INT64: (8, "int64_data"),
        TP.INT32: (4, small),
        TP.INT16: (2, small),
        TP.INT8: (1, small),
        TP.UINT16: (2, small),
        TP.UINT8: (1, small),
        TP.BOOL: (1, small),
        TP.FLOAT16: (2, small),
        TP.UINT32: (4, "uint64_data"),
        TP.UINT64: (8, "uint64_data"),
    }


def parse_model(source):
    """``(model, where, folder)``: the ``onnx.ModelProto`` in the file ``source`` (a path or a
    binary file object), parsed from its bytes (no external data is loaded), and the folder
    of a path (None for a file object).

    Raises
    ------
    ValueError
        The bytes are not an ONNX model (protobuf's DecodeError, named with the file).
    OSError
        Reading the file failed.
    """
    import onnx
    from google.protobuf.message import DecodeError

    if hasattr(source, "read"):
        where = f"onnx file {getattr(source, 'name', '<file>')!r}"
        folder = None
        data = source.read()
    else:
        where = f"onnx file {os.fspath(source)!r}"
        folder = os.path.dirname(os.path.abspath(source))
        with open(source, "rb") as f:
            data = f.read()
    if not isinstance(data, bytes):
        raise ValueError(f"{where}: expected a binary file, got {type(data).__name__} from read")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except DecodeError as exc:
        raise ValueError(
            f"{where}: not an ONNX model (protobuf could not parse it: {exc})"
        ) from None
    return model, where, folder


def _load_external(tensor, what, folder, fields):
    """Read an external tensor's bytes into its raw_data, when its file is inside ``folder``
    and holds them (onnx.load would open any path the file names)."""
    import onnx

    if folder is None:
        raise ValueError(
            f"{what}: its data is in an external file, and the model was not read from a path "
            "(load it by its path, or save it with save_as_external_data=False)"
        )
    info = {entry.key: entry.value for entry in tensor.external_data}
    location = info.get("location", "")
    try:
        offset = int(info.get("offset", "0"))
        length = None if "length" not in info else int(info["length"])
    except ValueError:
        raise ValueError(f"{what}: external data offset / length {info}") from None
    root = os.path.realpath(folder)
    path = os.path.realpath(os.path.join(root, location))
    if not location or os.path.isabs(location) or os.path.commonpath([root, path]) != root:
        raise ValueError(
            f"{what}: its external data {location!r} is not a file inside the model's folder "
            f"{root!r}"
        )
    if not os.path.isfile(path):
        raise ValueError(f"{what}: its external data file {location!r} is missing")
    dtype = tensor.data_type
    if dtype not in fields:
        raise ValueError(f"{what}: element type {dtype}, not a numeric ONNX type")
    dims = list(tensor.dims)
    if len(dims) > _MAX_NDIM or any(d < 0 for d in dims):
        raise ValueError(f"{what}: dims {dims}")
    want = math.prod(dims) * fields[dtype][0]
    size = os.path.getsize(path)
    if offset < 0 or (length is not None and length != want) or offset + want > size:
        raise ValueError(
            f"{what}: dims {dims} need {want:,} bytes at offset {offset:,} of {location!r}, "
            f"which has {size:,} bytes (length {length})"
        )
    with open(path, "rb") as f:
        f.seek(offset)
        tensor.raw_data = f.read(want)
    del tensor.external_data[:]
    tensor.data_location = onnx.TensorProto.DEFAULT


def _check_tensor(tensor, where, fields, folder):
    import onnx

    TP = onnx.TensorProto
    what = f"{where}: tensor {tensor.name!r}"
    if tensor.data_location == TP.EXTERNAL or len(tensor.external_data):
        _load_external(tensor, what, folder, fields)
    if tensor.HasField("segment"):
        raise ValueError(f"{what}: a segment of a tensor, which rnnfast does not read")
    if tensor.data_type not in fields:
        raise ValueError(f"{what}: element type {tensor.data_type}, not a numeric ONNX type")
    dims = list(tensor.dims)
    if len(dims) > _MAX_NDIM or any(d < 0 for d in dims):
        raise ValueError(f"{what}: dims {dims}")
    count = math.prod(dims)
    itemsize, field = fields[tensor.data_type]
    if tensor.raw_data:
        have, want = len(tensor.raw_data), count * itemsize
        unit = "bytes"
    else:
        have, want = len(getattr(tensor, field)), count
        unit = "values"
    if have != want:
        raise ValueError(
            f"{what}: dims {dims} need {want:,} {unit} of data, the file holds {have:,}"
        )


def _check_names(model, where):
    """Every name the reader compares is text: protobuf hands a string field that is not
    UTF-8 back as bytes."""
    graph = model.graph
    texts = [model.producer_name, *(o.domain for o in model.opset_import)]
    texts += [t.name for t in graph.initializer]
    texts += [v.name for v in (*graph.input, *graph.output)]
    for node in graph.node:
        texts += [node.op_type, node.name, node.domain, *node.input, *node.output]
        texts += [a.name for a in node.attribute]
    if not all(isinstance(t, str) for t in texts):
        bad = next(t for t in texts if not isinstance(t, str))
        raise ValueError(f"{where}: a name that is not UTF-8 text: {bad!r}")


def check_model(model, where, folder=None):
    """Refuse a model with a tensor of a non-numeric type or whose dims disagree with its
    data; names that are not UTF-8; sparse initializers; and attributes holding subgraphs. A
    tensor whose data is in an external file (``folder``: the model file's; None for a model
    not read from a path) has that data read into the model when the file lies inside
    ``folder`` and holds exactly the bytes the tensor's dims need.

    Raises
    ------
    ValueError
        The first such tensor or attribute, named; an external file outside ``folder`` (an
        absolute path, ``..`` or a link that leads out), missing, or shorter than the offset
        and length the tensor gives.
    OSError
        Reading an external file failed.
    """
    import onnx

    AP = onnx.AttributeProto
    fields = _typed_fields(onnx.TensorProto)
    graph = model.graph
    if len(graph.sparse_initializer):
        raise ValueError(f"{where}: sparse initializers, which rnnfast does not read")
    for tensor in graph.initializer:
        _check_tensor(tensor, where, fields, folder)
    _check_names(model, where)
    for node in graph.node:
        for attr in node.attribute:
            if attr.type in (AP.GRAPH, AP.GRAPHS) or attr.HasField("g") or len(attr.graphs):
                raise ValueError(
                    f"{where}: node {node.name!r} ({node.op_type}): attribute {attr.name!r} holds "
                    "a subgraph, which rnnfast does not read"
                )
            if attr.HasField("sparse_tensor") or len(attr.sparse_tensors):
                raise ValueError(
                    f"{where}: node {node.name!r} ({node.op_type}): a sparse tensor attribute"
                )
            if attr.HasField("t"):
                _check_tensor(attr.t, where, fields, folder)
            for tensor in attr.tensors:
                _check_tensor(tensor, where, fields, folder)
