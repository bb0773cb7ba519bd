"""``lazyflow.nn``: Module, Parameter, layers, losses, init and utilities with PyTorch's contracts."""

from . import functional, modules
from .module import IncompatibleKeys, Module, RemovableHandle
from .modules import *
from .parameter import Buffer, Parameter

__all__ = ["Module", "Parameter", "Buffer", "RemovableHandle", "IncompatibleKeys", "functional",
           *modules.__all__]
