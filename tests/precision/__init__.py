"""Tests of bf16 mixed precision (issue 40: ``precision="bf16"`` on the NumPy fronts): a
package, so its files may share basenames with those in tests/."""
