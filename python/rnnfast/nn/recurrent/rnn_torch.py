"""The recurrent layers to and from PyTorch's ``torch.nn.RNN`` / ``GRU`` / ``LSTM`` (the layer's
cell names which, ``nn.recurrent.cells``): they share one layout (``weight_ih_l{k}[_reverse]`` of shape
(G*H, D_k) in PyTorch's gate order, and so on), so converting is copying the configuration and
the weights. torch is imported only inside the functions (``RNN.from_torch``, ``RNN.to_torch``,
their GRU / LSTM counterparts and ``rnnfast.interop`` call them)."""

from __future__ import annotations

import warnings

import numpy as np

from .cells import ELMAN

__all__ = ["from_torch", "to_torch"]

# the constructor arguments that torch's recurrent modules and rnnfast's layers share, in
# torch's order; the cells' own (nn.RNN's nonlinearity, nn.LSTM's proj_size) by torch's name
_TORCH_CONFIG = (
    "input_size",
    "hidden_size",
    "num_layers",
    "bias",
    "batch_first",
    "dropout",
    "bidirectional",
)


def _config_names(cell):
    return _TORCH_CONFIG + cell.torch_options


def from_torch(module, cls):
    """A new rnnfast layer with the configuration and the weights of a ``torch.nn.RNN``.

    Parameters
    ----------
    module : torch.nn.RNN
        Any device; its parameters must be float32 or float64 (the new layer's dtype).
    cls : type
        The layer class to build (``rnnfast.RNN``, or a subclass: ``RNN.from_torch`` passes its
        own).

    Returns
    -------
    rnnfast.RNN
        Same input_size, hidden_size, num_layers, nonlinearity, bias, batch_first, dropout,
        bidirectional and dtype; a copy of the weights; training mode as the module's.

    Raises
    ------
    TypeError
        ``module`` is not a ``torch.nn.RNN`` (LSTM and GRU are other recurrences), or its
        parameters are neither float32 nor float64.
    ValueError
        The module uses an option rnnfast does not have (``proj_size``).
    NotImplementedError
        The configuration is one this build of rnnfast cannot construct.
    """
    import torch

    name = cls.cell.torch_name
    if not isinstance(module, getattr(torch.nn, name)):
        raise TypeError(
            f"module: expected a torch.nn.{name} (for rnnfast.{cls.__name__}), got "
            f"{type(module).__name__}"
        )
    if "proj_size" not in cls.cell.torch_options and getattr(module, "proj_size", 0):
        raise ValueError(f"module: proj_size={module.proj_size} has no rnnfast equivalent")
    dtypes = {p.dtype for p in module.parameters()}
    if len(dtypes) != 1 or next(iter(dtypes)) not in (torch.float32, torch.float64):
        raise TypeError(
            f"module: expected float32 or float64 parameters, got {sorted(map(str, dtypes))}"
        )
    dtype = np.float32 if next(iter(dtypes)) == torch.float32 else np.float64
    config = {name: getattr(module, name) for name in _config_names(cls.cell)}
    # torch keeps bidirectional as given (it accepts 1) and reads it by truth: so does this
    config["bidirectional"] = bool(config["bidirectional"])
    layer = cls(**config, dtype=dtype)
    layer.load_state_dict(module.state_dict())
    layer.train(module.training)
    return layer


def _torch_incompatibilities(layer):
    """The options of ``layer`` that change its mathematics in ways torch cannot express."""
    problems = []
    if getattr(layer, "reset_after", True) is False:
        problems.append("reset_after=False (torch's GRU applies the reset gate after the product)")
    if getattr(layer, "activation", "tanh") != "tanh":
        problems.append(f"activation={layer.activation!r}")
    if getattr(layer, "recurrent_activation", "sigmoid") != "sigmoid":
        problems.append(f"recurrent_activation={layer.recurrent_activation!r}")
    if getattr(layer, "peepholes", False):
        problems.append("peepholes=True (ONNX's LSTM peepholes)")
    if getattr(layer, "input_forget", False):
        problems.append("input_forget=True (coupled input and forget gates)")
    if getattr(layer, "cell_clip", None) is not None:
        problems.append(f"cell_clip={layer.cell_clip!r}")
    if getattr(layer, "go_backwards", False):
        problems.append("go_backwards=True")
    if getattr(layer, "residual", False):
        problems.append("residual=True")
    if getattr(layer, "input_to_all", False):
        problems.append("input_to_all=True (every layer k > 0 reading the stack's input)")
    if getattr(layer, "all_to_output", False):
        problems.append("all_to_output=True (every layer's output concatenated)")
    alpha = getattr(layer, "alpha", 1.0)
    if any(float(a) != 1.0 for a in (alpha if isinstance(alpha, (list, tuple)) else [alpha])):
        problems.append(f"alpha={alpha} (leaky units)")
    dilation = getattr(layer, "dilation", 1)
    if any(int(d) != 1 for d in (dilation if isinstance(dilation, (list, tuple)) else [dilation])):
        problems.append(f"dilation={dilation} (h_t reads h_(t-d))")
    merge_mode = getattr(layer, "merge_mode", "concat")
    if getattr(layer, "bidirectional", False) and merge_mode != "concat":
        problems.append(f"merge_mode={merge_mode!r} (torch concatenates the two directions)")
    return problems


def to_torch(layer):
    """A ``torch.nn.RNN`` (on the CPU) with the configuration and a copy of the weights of
    ``layer``.

    Parameters
    ----------
    layer : rnnfast.RNN

    Returns
    -------
    torch.nn.RNN
        float32, or float64 (``.double()``) for a float64 layer; training mode as the layer's.

    Raises
    ------
    ValueError
        The layer uses an option torch.nn.RNN does not have (go_backwards, residual
        connections, dense skips input_to_all / all_to_output, leaky units alpha < 1, a
        merge mode other than "concat").
    """
    import torch

    cell = getattr(layer, "cell", None)
    name = "RNN" if cell is None else cell.torch_name
    problems = _torch_incompatibilities(layer)
    if problems:
        raise ValueError(f"layer: torch.nn.{name} has no equivalent of {', '.join(problems)}")
    config = {n: getattr(layer, n) for n in _config_names(cell or ELMAN)}
    with warnings.catch_warnings():
        # torch warns that dropout with one layer has nothing to act on; rnnfast agrees, and the
        # value is kept so that the configuration round-trips unchanged.
        warnings.filterwarnings("ignore", message=".*dropout.*", category=UserWarning)
        module = getattr(torch.nn, name)(**config)
    if np.dtype(layer.dtype) == np.float64:
        module = module.double()
    state = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in layer.state_dict().items()}
    with torch.no_grad():
        module.load_state_dict(state)
    module.train(bool(getattr(layer, "training", True)))
    return module
