"""rnnfast as a library that threadpoolctl lists and limits.

threadpoolctl finds thread pools by walking the shared objects loaded in the process and
matching their file names; it then controls them through exported C symbols. rnnfast's module
(``_core*.so``) exports ``rnnfast_get_num_threads``/``rnnfast_set_num_threads`` for it, so that
``threadpool_limits(1)`` caps rnnfast beside OpenBLAS and OpenMP, and ``threadpool_info()``
shows rnnfast's budget. threadpoolctl is optional: without it this does nothing.
"""

from __future__ import annotations

from ._version import __version__

try:
    import threadpoolctl
except ImportError:  # pragma: no cover - threadpoolctl is an optional companion
    threadpoolctl = None

USER_API = "rnnfast"


def _controller_class():
    class RnnfastController(threadpoolctl.LibController):
        user_api = USER_API
        internal_api = "rnnfast"
        # Other packages' modules may be named _core too; check_symbols makes threadpoolctl
        # skip any that do not export rnnfast's functions.
        filename_prefixes = ("_core",)
        check_symbols = ("rnnfast_get_num_threads",)

        def get_num_threads(self):
            get = getattr(self.dynlib, "rnnfast_get_num_threads", None)
            return None if get is None else get()

        def set_num_threads(self, num_threads):
            set_ = getattr(self.dynlib, "rnnfast_set_num_threads", None)
            if set_ is not None:
                set_(int(num_threads))

        def get_version(self):
            return __version__

    return RnnfastController


def register() -> bool:
    """Register the controller once; returns whether threadpoolctl knows rnnfast now."""
    if threadpoolctl is None or not hasattr(threadpoolctl, "register"):
        return False
    if not any(c.user_api == USER_API for c in threadpoolctl._ALL_CONTROLLERS):
        threadpoolctl.register(_controller_class())
    return True
