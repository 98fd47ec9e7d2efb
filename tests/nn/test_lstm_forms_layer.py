"""rnnfast.LSTM's ONNX forms (peepholes, input_forget, cell_clip) on the recurrent layer
machinery: stacked and bidirectional against rnnfast.reference, gradients by finite
differences (float64), step(), save / load, summary, and the options refused by name."""

import numpy as np
import pytest

import rnnfast
from rnnfast import reference as R

FORMS = dict(peepholes=True, input_forget=True, cell_clip=1.5)


def _layer(rng, dtype=np.float64, forms=FORMS, **kw):
    layer = rnnfast.LSTM(4, 6, dtype=dtype, **forms, **kw)
    sd = layer.state_dict()
    for k in sd:  # peepholes away from their zeros
        if "peephole" in k:
            sd[k] = rng.uniform(-1, 1, sd[k].shape).astype(dtype)
    layer.load_state_dict(sd)
    return layer, sd


def _reference(sd, x, lengths, k, sfx, forms):
    names = [f"{n}_l{k}{sfx}" for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    p = sd.get(f"weight_peephole_l{k}{sfx}")
    return R.lstm_form_forward(
        x, *(sd[n] for n in names), lengths=lengths, peepholes=p,
        input_forget=forms.get("input_forget", False), cell_clip=forms.get("cell_clip"),
    )  # fmt: skip


def test_parameters_config_and_default():
    layer = rnnfast.LSTM(4, 6, peepholes=True)
    assert list(layer.state_dict())[-1] == "weight_peephole_l0"
    assert layer.state_dict()["weight_peephole_l0"].shape == (18,)
    assert not layer.state_dict()["weight_peephole_l0"].any()  # ONNX's default P
    again = rnnfast.LSTM(**layer.get_config())
    assert (again.peepholes, again.input_forget, again.cell_clip) == (True, False, None)
    assert "peepholes" not in rnnfast.LSTM(4, 6).get_config()  # the plain LSTM's is unchanged
    with pytest.raises(AttributeError, match="cell_clip is fixed"):
        layer.cell_clip = 2.0


@pytest.mark.parametrize(
    "forms", [FORMS, dict(peepholes=True), dict(input_forget=True), dict(cell_clip=0.5)]
)
@pytest.mark.parametrize("bidirectional", [False, True])
def test_stacked_matches_reference(forms, bidirectional):
    rng = np.random.default_rng(5)
    layer, sd = _layer(rng, forms=forms, num_layers=2, bidirectional=bidirectional)
    x = rng.standard_normal((5, 3, 4))
    lengths = [5, 3, 2]
    y, (h_n, c_n) = layer(x, lengths=lengths)
    inp = x
    for k in range(2):
        outs = []
        for d, sfx in enumerate(["", "_reverse"][: 1 + bidirectional]):
            seq = inp if d == 0 else rnnfast.reverse_sequences(inp, lengths)
            r = _reference(sd, seq, lengths, k, sfx, forms)
            outs.append(r.y if d == 0 else rnnfast.reverse_sequences(r.y, lengths))
        inp = np.concatenate(outs, axis=-1)
    np.testing.assert_allclose(y, inp, rtol=1e-10, atol=1e-10)


def test_backward_by_finite_differences():
    rng = np.random.default_rng(7)
    layer, sd = _layer(rng)
    layer.train()
    x = rng.standard_normal((4, 2, 4))
    gy = rng.standard_normal((4, 2, 6))
    y, _ = layer(x)
    dx, _ = layer.backward(gy)
    grads = dict(layer.grads)

    def loss(q):
        return (_reference(q, x, None, 0, "", FORMS).y * gy).sum()

    for name in ("weight_peephole_l0", "weight_hh_l0", "bias_ih_l0"):
        p = sd[name]
        for idx in np.ndindex(p.shape):
            fd = []
            for e in (1e-6, -1e-6):
                q = dict(sd)
                q[name] = p.copy()
                q[name][idx] += e
                fd.append(loss(q))
            assert abs((fd[0] - fd[1]) / 2e-6 - grads[name][idx]) < 1e-6, (name, idx)


def test_step_save_load_summary(tmp_path):
    rng = np.random.default_rng(9)
    layer, sd = _layer(rng)
    x = rng.standard_normal((3, 2, 4))
    y, _ = layer(x)
    state = None
    for t in range(3):
        out, state = layer.step(x[t], state)
        np.testing.assert_allclose(out, y[t], rtol=1e-12, atol=1e-12)
    path = tmp_path / "forms.npz"
    rnnfast.save(layer, path)
    again = rnnfast.load(path)
    assert (again.peepholes, again.input_forget, again.cell_clip) == (True, True, 1.5)
    np.testing.assert_array_equal(again(x)[0], y)
    # Keras-style count: W_ih, W_hh, one bias and the peepholes' 3H
    assert f"{24 * 4 + 24 * 6 + 24 + 18:,}" in layer.summary()


def test_refused_by_name():
    with pytest.raises(ValueError, match=r"peepholes=True: not supported for LSTM .*proj_size=0"):
        rnnfast.LSTM(4, 6, proj_size=2, peepholes=True)
    with pytest.raises(ValueError, match="cell_clip=0.5: not supported for LSTM"):
        rnnfast.LSTM(4, 6, proj_size=2, cell_clip=0.5)
    with pytest.raises(ValueError, match="cell_clip: expected a float > 0"):
        rnnfast.LSTM(4, 6, cell_clip=-1.0)
    with pytest.raises(TypeError, match="input_forget"):
        rnnfast.LSTM(4, 6, input_forget=1)
    for name, value in FORMS.items():
        with pytest.raises(ValueError, match=f"{name}=.*not supported for LayerNormLSTM"):
            rnnfast.LayerNormLSTM(4, 6, **{name: value})
    layer = rnnfast.LSTM(4, 6, input_forget=True, dtype=np.float32)
    with pytest.raises(ValueError, match="input_forget or cell_clip cannot be quantized"):
        rnnfast.quantize(layer, "int8")


def test_no_torch_or_keras_counterpart():
    pytest.importorskip("torch")
    layer = rnnfast.LSTM(4, 6, peepholes=True, cell_clip=2.0)
    with pytest.raises(ValueError, match=r"torch.nn.LSTM has no equivalent of peepholes=True"):
        layer.to_torch()
    with pytest.raises(ValueError, match=r"peepholes=True .*no Keras equivalent.*onnx"):
        rnnfast.io.interop.keras_weights(layer)
