"""``lazyflow.nn``: Module, Parameter, layers, losses, init and utilities with PyTorch's contracts."""

from . import functional, init, modules, utils
from .module import IncompatibleKeys, Module, RemovableHandle
from .modules import *
from .parameter import Buffer, Parameter

__all__ = ["Module", "Parameter", "Buffer", "RemovableHandle", "IncompatibleKeys", "functional", "init", "utils",
           *modules.__all__]


def __getattr__(name: str):
    # nn.Graph lives in lazyflow.graph (which imports nn.Module): resolved on first use to avoid the cycle
    if name in ("Graph", "GraphConfig", "GraphInfo"):
        from ..graph import nn_graph

        return getattr(nn_graph, name)
    raise AttributeError(f"module 'lazyflow.nn' has no attribute '{name}'")
