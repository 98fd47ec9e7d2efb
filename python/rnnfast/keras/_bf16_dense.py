"""The rnnfast layer of a front ``Dense`` under Keras's "mixed_bfloat16" policy: rnnfast's
Dense whose forward and backward multiply with bf16 products (``rnnfast.precision``: both
operands rounded to bf16, float32 sums), its weights, bias, activation and gradients float32.
rnnfast's recurrent layers take ``precision=`` for this; its Dense has no such option, so the
front gives the Dense of a mixed layer this class (a Dense of another policy stays float32)."""

from __future__ import annotations

from ..nn import Dense
from ..nn._mixed_precision import layer_products
from ..precision import check_precision

__all__ = ["BF16ProductsDense"]


class BF16ProductsDense(Dense):
    """``rnnfast.Dense`` with bf16 products in forward and backward (a model's or fit's own
    ``precision``, when given, wins, as over a recurrent layer's)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        check_precision("bf16", self.dtype)  # float32, on a CPU with bf16 products

    def forward(self, x):
        with layer_products("bf16"):
            return super().forward(x)

    def backward(self, dy):
        with layer_products("bf16"):
            return super().backward(dy)
