"""ascend_boost_comm: the founding document's name for boostcomm.

    import ascend_boost_comm as abc      # the very same module as `import boostcomm as abc`

The document's code runs unchanged (its tensors on the CPU, device="cpu",
where it writes .npu()). This package is only a name: importing it binds
`ascend_boost_comm` to the `boostcomm` module itself, and
`ascend_boost_comm.X` to `boostcomm.X` (torch, plot, ...), so there is one
state (one communicator, one set of process groups) whichever name a
program uses. Reference: docs/PYTHON.md.
"""

import importlib
import importlib.abc
import importlib.util
import sys

import boostcomm as _target

_ALIAS, _TARGET = __name__, _target.__name__


class _SubmoduleAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """ascend_boost_comm.X -> the already-imported (or now imported) boostcomm.X."""

    def find_spec(self, name, path=None, target=None):
        if not name.startswith(_ALIAS + "."):
            return None
        real = _TARGET + name[len(_ALIAS):]
        if importlib.util.find_spec(real) is None:
            return None
        return importlib.util.spec_from_loader(name, self)

    def __init__(self):
        self._specs = {}  # alias name -> the real module's own spec

    def create_module(self, spec):
        real = importlib.import_module(_TARGET + spec.name[len(_ALIAS):])
        self._specs[spec.name] = getattr(real, "__spec__", None)
        return real

    def exec_module(self, module):
        # The import system stamped the alias spec on the real module: give it back its own.
        real_spec = self._specs.pop(module.__spec__.name, None)
        if real_spec is not None:
            module.__spec__ = real_spec


if not any(isinstance(f, _SubmoduleAlias) for f in sys.meta_path):
    sys.meta_path.insert(0, _SubmoduleAlias())
sys.modules[_ALIAS] = _target
