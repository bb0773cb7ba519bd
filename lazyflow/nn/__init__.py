"""``lazyflow.nn``: Module, Parameter, layers, losses, init and utilities with PyTorch's contracts."""

from . import attention, functional, init, modules, parallel, utils
from .module import IncompatibleKeys, Module, RemovableHandle
from .modules import *
from .parallel import DataParallel
from .parameter import Buffer, Parameter

__all__ = [
    "Module",
    "Parameter",
    "Buffer",
    "RemovableHandle",
    "IncompatibleKeys",
    "functional",
    "init",
    "utils",
    "parallel",
    "DataParallel",
    *modules.__all__,
]


# lf.nn.Graph is defined in lazyflow.graph (above nn and optim) and attached by lazyflow/__init__.py; declared
# here (an annotation only: no value, no import) so that a type checker knows the name.
Graph: type
