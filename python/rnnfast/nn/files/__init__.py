"""Saving and loading layers and models: ``persistence`` (``rnnfast.save`` / ``rnnfast.load``),
the .npz file format (``_file_format``: configuration as JSON, parameters as arrays, no
pickle) and its reader (``_npz``)."""
