"""The package's version, in a module of its own: the modules that report it (``show_config``,
threadpoolctl's controller) sit below the package's ``__init__``, which they must not import."""

__version__ = "0.1.0"
