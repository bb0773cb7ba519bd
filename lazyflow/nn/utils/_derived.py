"""A module attribute computed from other state on every access (a property on a per-instance subclass that keeps
the class's name), used by the legacy weight_norm/spectral_norm hooks and by pruning: ``module.weight`` stays a
function of ``weight_g``/``weight_v`` (or ``weight_orig``/``weight_mask``), so nothing computed inside a compiled
trace is left behind on the module."""

from __future__ import annotations

from collections.abc import Callable

from ..._tensor import Tensor
from ..module import Module


def install(module: Module, name: str, compute: Callable[[Module], Tensor]) -> None:
    """Make ``module.<name>`` read ``compute(module)``."""
    cls = type(module)
    if "_lf_derived" not in vars(cls):
        module.__class__ = type(
            cls.__name__, (cls,), {"_lf_derived": True, "__module__": cls.__module__, "__qualname__": cls.__qualname__}
        )
    setattr(type(module), name, property(compute))


def uninstall(module: Module, name: str) -> None:
    """Undo :func:`install` for ``name`` (the original class comes back when no derived attribute is left)."""
    cls = type(module)
    if name in vars(cls):
        delattr(cls, name)
    if "_lf_derived" in vars(cls) and not any(isinstance(v, property) for v in vars(cls).values()):
        module.__class__ = cls.__bases__[0]
