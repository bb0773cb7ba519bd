"""``lf.jit``: torch.jit's entry points, accepted by code that scripts or traces for speed, mapped onto
:func:`lazyflow.compile`.

``lf.jit.script(model)`` and ``lf.jit.trace(model, x)`` return ``lf.compile(model)``: the same numbers as the module
(run as one XLA program per input signature), the same ``state_dict`` keys, the same training/eval switch. There is
no TorchScript: nothing is saved as a program (``lf.jit.save`` raises), and the code runs as Python while JAX traces
it, so ``is_scripting()`` is always False.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from ._core.context import state
from ._core.errors import ArgumentError, NotSupportedError, OpError
from .graph import CompiledFunction, CompiledModule
from .graph import compile as _compile

__all__ = ["script", "trace", "ignore", "unused", "is_scripting", "is_tracing", "save", "load"]

F = TypeVar("F", bound=Callable[..., Any])


def script(
    obj: Any,
    optimize: None = None,
    _frames_up: int = 0,
    _rcb: Callable[[str], Any] | None = None,
    example_inputs: list[tuple] | dict[Callable, list[tuple]] | None = None,
) -> Any:
    """``lf.compile(obj)`` for a module or a function (torch.jit.script's signature); a class, or something already
    compiled, comes back unchanged.

    Args:
        obj: an ``lf.nn.Module`` (returns a :class:`~lazyflow.graph.CompiledModule`: its ``state_dict`` has the
            module's keys) or a function of tensors.
        optimize, example_inputs: accepted for torch compatibility; unused (nothing is type-annotated or profiled:
            the program is traced on each new input signature).
    >>> scripted = lf.jit.script(model)
    >>> scripted(x)        # model(x)'s numbers, compiled
    """
    if isinstance(obj, (CompiledModule, CompiledFunction, type)):
        return obj
    if not callable(obj):
        raise ArgumentError(f"lf.jit.script expects an lf.nn.Module or a function, got {type(obj).__name__}")
    return _compile(obj)


def trace(
    func: Any,
    example_inputs: Any = None,
    optimize: None = None,
    check_trace: bool = True,
    check_inputs: list[tuple] | None = None,
    check_tolerance: float = 1e-05,
    strict: bool = True,
    _force_outplace: bool = False,
    _module_class: Any = None,
    _compilation_unit: Any = None,
    example_kwarg_inputs: dict[str, Any] | None = None,
    _store_inputs: bool = True,
) -> Any:
    """``lf.compile(func)``, run once on the example (torch.jit.trace's signature): the example's program is traced
    and compiled now.

    Unlike torch's trace, the result is not frozen to the example's control flow or shapes: a call with a new input
    signature is traced again.

    Args:
        func: an ``lf.nn.Module`` or a function of tensors.
        example_inputs: a tuple of positional arguments, or a single tensor.
        example_kwarg_inputs: keyword arguments for the example call.
        check_trace, check_inputs, check_tolerance: not supported -- accepted and ignored: there is no second
            TorchScript trace to compare; the compiled program is lazyflow's own trace of the same Python code.
        optimize, strict: accepted for torch compatibility; unused.
    Raises:
        ArgumentError: neither ``example_inputs`` nor ``example_kwarg_inputs`` given.
    >>> traced = lf.jit.trace(model, lf.randn(8, 4))
    """
    if example_inputs is None and example_kwarg_inputs is None:
        raise ArgumentError("lf.jit.trace needs example_inputs (a tuple of arguments or a tensor) to run once")
    compiled = script(func)
    args = example_inputs if isinstance(example_inputs, tuple) else () if example_inputs is None else (example_inputs,)
    compiled(*args, **(example_kwarg_inputs or {}))
    return compiled


def ignore(drop: Any = False, *, drop_on_export: bool | None = None) -> Any:
    """torch.jit.ignore: returns the function unchanged (everything runs as Python under lazyflow). Used bare
    (``@lf.jit.ignore``) or called (``@lf.jit.ignore(drop=True)``, deprecated in torch: it warns the same way).

    Raises:
        OpError: ``drop`` neither a bool nor a function (a RuntimeError, as in torch).
    """
    if callable(drop):
        return drop
    if not isinstance(drop, bool):
        raise OpError(f"Argument to @lf.jit.ignore must be a bool or a function but got {drop!r}")
    if drop or drop_on_export:
        warnings.warn(
            "ignore(True) has been deprecated (as in torch). The function is kept and called as Python; use "
            "lf.jit.unused now.",
            FutureWarning,
            stacklevel=2,
        )
    return lambda fn: fn


def unused(fn: F) -> F:
    """torch.jit.unused: returns ``fn`` unchanged."""
    return fn


def is_scripting() -> bool:
    """Always False: lazyflow never compiles Python into TorchScript; scripted code runs as Python."""
    return False


def is_tracing() -> bool:
    """True while lazyflow traces code into a program (``lf.jit.script/trace``, ``lf.compile``, ``lf.nn.Graph``);
    False when it runs eagerly, as ``torch.jit.is_tracing()`` outside a trace."""
    return bool(state.tracing)


def save(m: Any, f: Any, _extra_files: Any = None) -> NoReturn:
    """Not supported: lazyflow writes no TorchScript archives.

    Raises:
        NotSupportedError: always; save the weights with ``lf.save(model.state_dict(), path)`` instead.
    """
    raise NotSupportedError(
        "lf.jit.save is not supported: lazyflow has no TorchScript programs to archive. Save the weights with "
        "lf.save(model.state_dict(), path) and rebuild the model in code; lf.jit.script(model) compiles it again"
    )


def load(f: Any, map_location: Any = None, _extra_files: Any = None, _restore_shapes: bool = False) -> NoReturn:
    """Not supported: lazyflow reads no TorchScript archives.

    Raises:
        NotSupportedError: always; load weights saved by ``lf.save`` with ``model.load_state_dict(lf.load(path))``.
    """
    raise NotSupportedError(
        "lf.jit.load is not supported: lazyflow reads no TorchScript archives. Load weights saved by lf.save with "
        "model.load_state_dict(lf.load(path))"
    )
