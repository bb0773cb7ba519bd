"""Graph (lazy) mode: ``lf.compile`` and ``lf.nn.Graph`` over the same Tensor/Parameter objects as eager mode."""

from typing import Any

from .._core.checks import index_checks_enabled, set_index_checks
from .._core.errors import GraphError
from ..nn.module import Module
from .compile import CompiledFunction, CompileInfo
from .module import CompiledModule
from .nn_graph import Graph, GraphConfig
from .trace import TraceInterpreter, Tracing

__all__ = [
    "GraphError",
    "CompiledFunction",
    "CompileInfo",
    "TraceInterpreter",
    "Tracing",
    "compile",
    "Graph",
    "GraphConfig",
    "CompiledModule",
    "set_index_checks",
    "index_checks_enabled",
]


def compile(
    model=None,
    *,
    fullgraph: bool = False,
    dynamic=None,
    backend=None,
    mode=None,
    options=None,
    disable: bool = False,
    cache_size_limit: int = 8,
    recompile_limit: int = 8,
    on_recompile_limit: str = "eager",
):
    """Compile a module or a function of tensors into XLA programs (torch.compile's signature).

    Args:
        model: an ``lf.nn.Module`` (returns a :class:`CompiledModule` whose ``state_dict``/``load_state_dict``
            pass straight through to the module: same keys, no ``_orig_mod.`` prefix) or a function of
            tensors. Used bare or as a decorator, with or without arguments.
        cache_size_limit: how many signature variants stay compiled (LRU).
        recompile_limit: how many variants may be compiled before lazyflow warns once (naming what changed)
            and then runs new signatures eagerly (``on_recompile_limit="eager"``) or raises
            :class:`GraphError` (``"raise"``).
        dynamic: ``None``/``False`` (default): one program per input shape. ``True``: calls whose tensor
            arguments differ only in their first dimension (the last partial batch, a smaller evaluation batch)
            reuse the program compiled for a larger batch -- the arguments are padded with copies of their last
            row and the outputs cut back -- once lazyflow has proved on the traced program that each output row
            depends only on its own input row (no batch statistics, no mean over the batch, no per-row random
            numbers); otherwise it warns once, naming the line, and compiles each size exactly. Results are the
            same either way (see :mod:`lazyflow.graph.dynamic`).
        disable: return ``model`` unchanged.
        fullgraph, backend, mode, options: accepted for torch compatibility; lazyflow always compiles the whole
            call into one program.
    >>> cm = lf.compile(model)
    >>> @lf.compile
    ... def f(x, y): return (x * y).sum()
    """
    kw: dict[str, Any] = dict(
        cache_size_limit=cache_size_limit,
        recompile_limit=recompile_limit,
        on_recompile_limit=on_recompile_limit,
        dynamic=dynamic,
    )
    if model is None:
        return lambda m: compile(m, disable=disable, **kw)
    if disable:
        return model
    if isinstance(model, Module):
        return CompiledModule(model, **kw)
    if not callable(model):
        raise TypeError(f"lf.compile expects an lf.nn.Module or a callable, got {type(model).__name__}")
    return CompiledFunction(model, **kw)
