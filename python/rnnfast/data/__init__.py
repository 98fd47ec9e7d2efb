"""Data helpers for variable-length sequences: padding, lengths and masks, reversal within
lengths, a token Vocabulary and length-bucketed batches.

A typical pipeline: ``vocab = Vocabulary.build(texts)``, ``ids = vocab.encode_batch(texts)``,
then for each ``index`` of ``BucketedBatches([len(s) for s in ids], 32, seed=0)``,
``pad_sequences([ids[i] for i in index], padding_value=vocab.pad_id)`` gives the batch and
the ``lengths`` an RNN takes.
"""

from __future__ import annotations

from .batching import BucketedBatches
from .conllu import Sentence, read_conllu
from .masks import lengths_to_mask, mask_to_lengths
from .padding import pad_sequences, unpad_sequences
from .reversal import reversal_index, reverse_sequences  # noqa: F401 - reversal_index for rnn.py
from .vocabulary import Vocabulary

__all__ = [
    "pad_sequences",
    "unpad_sequences",
    "mask_to_lengths",
    "lengths_to_mask",
    "reverse_sequences",
    "Vocabulary",
    "BucketedBatches",
    "Sentence",
    "read_conllu",
]
