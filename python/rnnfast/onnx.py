"""``import rnnfast.onnx`` (as ``import rnnfast.torch``): this module is ``rnnfast.io.onnx``
itself, not a copy, so the two paths name the same functions; the onnx package is imported
inside them only."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module(".io.onnx", __package__)
