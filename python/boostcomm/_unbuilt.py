"""A stand-in for the compiled module `boostcomm._boostcomm` where it cannot
be imported: not built (the package imported from the source tree), or a
library it links (libmpi, libboostcomm) is missing.

Why: `python3 -m boostcomm.plot` reads JSON only and must run on a machine
(a laptop, CI's artefact viewer) that has the results but no build or MPI;
Python imports the package's __init__ before any submodule, and __init__
binds names from the compiled module. With the stand-in the package imports,
and every native call raises the original ImportError, naming it.
"""

import sys
import types


class _Unbuilt(types.ModuleType):
    def __init__(self, name, error):
        super().__init__(name)
        self._error = error
        self.__version__ = "unknown (compiled module not importable)"

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        error = self._error

        def unavailable(*args, **kwargs):
            raise ImportError(f"boostcomm: {attr} needs the compiled module boostcomm._boostcomm, which could "
                              f"not be imported ({error}); build it with `make build` and put build/python on "
                              "PYTHONPATH") from error

        if attr[:1].isupper():
            # A class (Error, Work, ...): usable in `except` clauses and
            # isinstance checks; constructing one raises.
            base = (Exception,) if attr.endswith("Error") else ()
            value = type(attr, base, {"__init__": unavailable})
        else:
            value = unavailable
        setattr(self, attr, value)  # the same object on every access
        return value


def install(name, error):
    """Registers the stand-in as module `name` (so every `from . import
    _boostcomm` in the package gets it) and returns it."""
    module = _Unbuilt(name, error)
    sys.modules[name] = module
    return module
