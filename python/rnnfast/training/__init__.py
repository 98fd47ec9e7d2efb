"""Training loops: fit / evaluate / predict over any model with the layer protocol (call,
backward, named_parameters, grads, zero_grad, train/eval), callbacks, and truncated BPTT
batches for long streams.

A loss is ``"mse"``, ``"cross_entropy"`` or a callable ``loss(output, targets) -> (value,
d_output)`` (the losses module's fused form; it also gets ``mask=`` when the batch is padded).

Variable-length data: inputs may be a ragged list of sequences, or a padded array with
``lengths=`` / ``mask=``; each batch is padded to its own longest sequence (bucketed by length
with ``bucket=True``), its lengths travel through the model, and the padding never reaches a
loss or a metric. Metrics are reduced over the whole data set from counts. The layout
(batch-first or time-major) is the model's RNNs' ``batch_first``: said once, there.

The package: ``_loop`` is the engine every fit runs (and ``rnnfast.distributed``'s too),
``_batches`` the data side, ``_scoring`` the losses and metrics over padded batches, ``_fit``,
``_stream``, ``_seq2seq`` and ``_self_critical`` (sequence-level training by REINFORCE) the
functions, ``_callbacks`` the callbacks, ``_progress`` the progress shown (``verbose``),
``_backup`` and ``_archive`` the backups that let a killed run resume (``backup_dir``).
"""

from __future__ import annotations

from ._batches import stream_windows
from ._callbacks import EarlyStopping, ModelCheckpoint
from ._fit import evaluate, fit, predict
from ._scoring import sentence_bleu
from ._self_critical import fit_self_critical, policy_gradient
from ._seq2seq import evaluate_seq2seq, fit_seq2seq
from ._stream import evaluate_stream, fit_stream

__all__ = [
    "EarlyStopping",
    "ModelCheckpoint",
    "evaluate",
    "evaluate_seq2seq",
    "evaluate_stream",
    "fit",
    "fit_self_critical",
    "fit_seq2seq",
    "fit_stream",
    "policy_gradient",
    "predict",
    "sentence_bleu",
    "stream_windows",
]
