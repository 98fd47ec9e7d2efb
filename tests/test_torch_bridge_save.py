"""A whole model holding the bridge's modules saved with ``torch.save`` reloads with
``torch.load``'s default ``weights_only=True``, as one holding ``torch.nn``'s modules does.
(Calls under ``torch.autocast("cpu")``: ``test_torch_autocast*.py``.)"""

from __future__ import annotations

import io

import pytest
from conftest import import_torch

torch = import_torch()
rt = pytest.importorskip("rnnfast.torch")
nn = torch.nn


class LanguageModel(nn.Module):
    """The word-level language model's shape: Embedding -> LSTM (2 layers, dropout) -> GRU
    (bidirectional) -> RNN (relu) -> Linear, built from ``recurrent`` (torch.nn or the bridge)."""

    recurrent = nn

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.lstm = self.recurrent.LSTM(4, 6, num_layers=2, dropout=0.2)
        self.gru = self.recurrent.GRU(6, 3, bidirectional=True)
        self.rnn = self.recurrent.RNN(6, 5, nonlinearity="relu")
        self.out = nn.Linear(5, 10)

    def forward(self, tokens):
        y, _ = self.lstm(self.emb(tokens))
        y, _ = self.gru(y)
        return self.out(self.rnn(y)[0])


class BridgeLanguageModel(LanguageModel):
    recurrent = rt


# what a user allows for their own model of torch.nn's modules (torch allows none of them)
USERS_GLOBALS = [LanguageModel, BridgeLanguageModel, nn.Embedding, nn.Linear, nn.LSTM, nn.GRU]
USERS_GLOBALS += [nn.RNN]


@pytest.mark.parametrize("cls", [LanguageModel, BridgeLanguageModel])
def test_whole_model_reloads_with_weights_only(cls):
    torch.manual_seed(0)
    model = cls()
    tokens = torch.randint(0, 10, (7, 3))
    model(tokens).sum().backward()  # the bridge's per-call caches exist before saving
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    with torch.serialization.safe_globals(USERS_GLOBALS):
        loaded = torch.load(buffer)  # weights_only=True, torch's default
    assert type(loaded.lstm) is type(model.lstm)
    model.eval(), loaded.eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(tokens), model(tokens), rtol=0, atol=0)
    loaded.train()
    loaded(tokens).sum().backward()  # and trains on
    assert loaded.lstm.weight_hh_l1.grad is not None


def test_only_the_bridge_classes_are_allowed():
    allowed = {f"{c.__module__}.{c.__qualname__}" for c in torch.serialization.get_safe_globals()}
    ours = {name for name in allowed if name.startswith("rnnfast")}
    assert ours == {
        "rnnfast.torch.RNN",
        "rnnfast.torch.GRU",
        "rnnfast.torch.LSTM",
        "rnnfast._torch_layer_norm.LayerNormLSTM",
    }


def test_a_model_holding_the_layer_norm_lstm_reloads_with_weights_only():
    torch.manual_seed(0)
    model = nn.Sequential(rt.LayerNormLSTM(3, 4))
    x = torch.randn(5, 2, 3)
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    # what a user allows for torch.nn's own modules; rnnfast's class is allowed by the import
    with torch.serialization.safe_globals([nn.Sequential, nn.Linear, nn.LayerNorm]):
        loaded = torch.load(buffer)
    with torch.no_grad():
        torch.testing.assert_close(loaded[0](x)[0], model[0](x)[0], rtol=0, atol=0)
