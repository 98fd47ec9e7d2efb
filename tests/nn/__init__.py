"""Tests of rnnfast.nn: a package, so its files may share basenames with those in tests/."""
