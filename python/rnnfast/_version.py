"""The package's version, in a module of its own: the modules that report it (``show_config``,
threadpoolctl's controller) sit below the package's ``__init__``, which they must not import.

The one place the version is written: the package metadata reads it here at build time
(pyproject.toml, scikit-build-core's regex provider) and the docs from the package."""

__version__ = "0.1.0"
