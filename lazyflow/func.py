"""``lf.func``: a module as a pure function of its parameters and buffers, and the function transforms (vmap, grad,
jacrev, jacfwd, hessian, vjp, jvp, linearize: see :mod:`lazyflow._transforms`), with torch.func's names and
semantics.

:func:`functional_call` runs ``module`` with some or all of its parameters and buffers replaced by the given
values, for this call only: the module's own tensors are never touched. Given lazyflow tensors it runs eagerly and
gradients flow to the given tensors (torch's behaviour). Given JAX arrays it is a pure function of JAX values that
returns JAX arrays, usable under ``jax.jit``, ``jax.grad``, ``jax.vmap``, ``shard_map`` and with optax: inside a
JAX trace the module runs on graph mode's trace interpreter (the op table's implementations called on tracers, as
in ``lf.compile``), so JAX differentiates, batches and shards it like any jax.numpy code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.core
import jax.numpy as jnp

from ._core.context import state
from ._core.errors import ArgumentError, LazyflowError, OpError
from ._creation import default_generator
from ._tensor import Tensor, _make
from ._transforms import (
    VmapError,
    functionalize,
    grad,
    grad_and_value,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    linearize,
    vjp,
)
from ._vmap import vmap
from .graph.functionalize import RngCounter, rng_inputs, traced
from .graph.trace import Tracing
from .nn.module import Module
from .utils.jax import from_jax, to_jax

__all__ = [
    "functional_call",
    "stack_module_state",
    "TiedWeightsError",
    "vmap",
    "functionalize",
    "grad",
    "grad_and_value",
    "jacrev",
    "jacfwd",
    "hessian",
    "vjp",
    "jvp",
    "linearize",
    "VmapError",
]

_Tracer = jax.core.Tracer
_is_tensor = lambda x: isinstance(x, Tensor)


class TiedWeightsError(LazyflowError, ValueError):
    """Different values given for names of one tied parameter (torch raises a ValueError)."""


def _merge(params_and_buffers) -> dict:
    if isinstance(params_and_buffers, Mapping):
        return dict(params_and_buffers)
    if isinstance(params_and_buffers, Sequence) and not isinstance(params_and_buffers, str):
        out: dict = {}
        for d in params_and_buffers:
            if not isinstance(d, Mapping):
                raise ArgumentError(
                    f"functional_call: parameters_and_buffers must be a dict or a tuple of dicts, got a tuple "
                    f"holding a {type(d).__name__}"
                )
            dup = set(out) & set(d)
            if dup:
                raise ArgumentError(f"functional_call: {sorted(dup)} appeared in multiple dictionaries")
            out.update(d)
        return out
    raise ArgumentError(
        f"functional_call: parameters_and_buffers must be a dict or a tuple of dicts, got "
        f"{type(params_and_buffers).__name__}"
    )


def _slots(module: Module) -> dict[str, tuple[Module, str, str]]:
    """Every dotted name (tied aliases included) -> (owning module, store attribute, local name)."""
    slots = {}
    for prefix, m in module.named_modules(remove_duplicate=False):
        for store in ("_parameters", "_buffers"):
            for k, v in getattr(m, store).items():
                if v is not None:
                    slots[f"{prefix}.{k}" if prefix else k] = (m, store, k)
    return slots


def _plan(module: Module, values: dict, tie_weights: bool, strict: bool) -> dict[str, Any]:
    """Which slot gets which value; tied aliases follow the given name when ``tie_weights``."""
    slots = _slots(module)
    unexpected = [k for k in values if k not in slots]
    if strict:
        missing = [k for k in slots if k not in values]
        if tie_weights:  # a tied alias is satisfied by its twin's key
            given = {id(getattr(slots[k][0], slots[k][1])[slots[k][2]]) for k in values if k in slots}
            missing = [k for k in missing if id(getattr(slots[k][0], slots[k][1])[slots[k][2]]) not in given]
        if missing or unexpected:
            msgs = []
            if unexpected:
                msgs.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
            if missing:
                msgs.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
            raise OpError(
                f"Error(s) in reparametrizing for {type(module).__name__}:\n\t"
                + "\n\t".join(msgs)
                + "\n\tpass every parameter and buffer name (module.state_dict() keys), or strict=False"
            )
    plan = {k: v for k, v in values.items() if k in slots}  # torch ignores unknown names unless strict
    if tie_weights:
        by_tensor: dict[int, list[str]] = {}
        for k, (m, store, name) in slots.items():
            by_tensor.setdefault(id(getattr(m, store)[name]), []).append(k)
        for names in by_tensor.values():
            given = [k for k in names if k in values]
            if len(given) > 1 and any(values[g] is not values[given[0]] for g in given[1:]):
                raise TiedWeightsError(
                    f"functional_call got multiple values for keys {given}, which are tied. Consider using "
                    "tie_weights=False"
                )
            if given:
                for k in names:
                    plan[k] = values[given[0]]
    return {k: (slots[k], v) for k, v in plan.items()}


def _swap(plan) -> list:
    saved = []
    try:
        for (m, store, name), v in plan.values():
            d = getattr(m, store)
            saved.append((d, name, d[name]))
            d[name] = v
    except BaseException:
        _unswap(saved)
        raise
    return saved


def _unswap(saved) -> None:
    for d, name, old in reversed(saved):
        d[name] = old


def _is_jax_leaf(x) -> bool:
    return isinstance(x, (jax.Array, _Tracer))


def functional_call(
    module: Module,
    parameter_and_buffer_dicts: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    args: Any = None,
    kwargs: dict[str, Any] | None = None,
    *,
    tie_weights: bool = True,
    strict: bool = False,
) -> Any:
    """Call ``module(*args, **kwargs)`` with its parameters and buffers replaced by the given values.

    Args:
        module: the module to call; its own parameters and buffers are unchanged afterwards.
        parameter_and_buffer_dicts: ``{dotted name: value}`` (or a tuple of such dicts), values lazyflow tensors or
            JAX arrays; names not given keep the module's own tensors.
        args: the positional arguments (a single non-tuple value means one argument).
        kwargs: keyword arguments.
        tie_weights: a value given for one name of tied parameters is used for all of its aliases.
        strict: every parameter and buffer name must be given, and no other.
    Returns:
        The module's output. If any value or argument is a JAX array, the call is a pure JAX function: tensors in
        the output are returned as JAX arrays. Otherwise tensors, with gradients flowing to the given tensors.
    Raises:
        ArgumentError: a value that is neither a Tensor nor a JAX array, or a malformed dict argument.
        OpError: under ``strict``, missing or unknown names (a RuntimeError, as torch). Without ``strict``
            unknown names are ignored, as torch does.
        TiedWeightsError: tied names given different values (a ValueError, as torch).
        GraphError: (JAX inputs) the module writes in place to one of its own tensors that was not given (a
            BatchNorm's running statistics in training mode): pass the buffers too, or call ``module.eval()``.
            In-place updates of given buffers stay inside the call (JAX values are immutable).

    >>> out = lf.func.functional_call(model, {k: v * 0 for k, v in model.state_dict().items()}, (x,))
    """
    if not isinstance(module, Module):
        raise ArgumentError(f"functional_call expects an lf.nn.Module, got {type(module).__name__}")
    values = _merge(parameter_and_buffer_dicts)
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    kwargs = {} if kwargs is None else kwargs
    for k, v in values.items():
        if not isinstance(v, (Tensor, jax.Array, _Tracer)):
            raise ArgumentError(
                f"functional_call: the value for {k!r} is a {type(v).__name__}; give a lazyflow Tensor or a JAX array"
            )
    leaves = jax.tree_util.tree_leaves((values, args, kwargs), is_leaf=_is_tensor)
    jax_mode = any(_is_jax_leaf(x) for x in leaves)
    if not jax_mode:
        saved = _swap(_plan(module, values, tie_weights, strict))
        try:
            return module(*args, **kwargs)
        finally:
            _unswap(saved)
    tensors = {
        k: (v if isinstance(v, Tensor) else traced(v) if isinstance(v, _Tracer) else from_jax(v))
        for k, v in values.items()
    }
    jargs, jkwargs = from_jax((args, kwargs))
    if not any(isinstance(x, _Tracer) for x in leaves):
        # concrete JAX values outside any JAX trace: the eager kernels, no tape (the caller asked for arrays)
        saved = _swap(_plan(module, tensors, tie_weights, strict))
        prev = state.grad_enabled
        try:
            state.grad_enabled = False
            return to_jax(module(*jargs, **jkwargs))
        finally:
            state.grad_enabled = prev
            _unswap(saved)
    seed, offset = rng_inputs()
    rng = RngCounter(jnp.uint32(seed), jnp.uint32(offset))
    saved = _swap(_plan(module, tensors, tie_weights, strict))
    prev = state.grad_enabled
    try:
        with Tracing(rng_hook=rng):
            state.grad_enabled = False
            out = module(*jargs, **jkwargs)
    finally:
        state.grad_enabled = prev
        _unswap(saved)
    default_generator._offset += rng.count  # the next call (or trace) draws fresh numbers
    return to_jax(out)


def stack_module_state(models: Sequence[Module]) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """Stack the parameters and buffers of identically shaped ``models`` along a new leading dimension.

    Returns ``(params, buffers)``: dicts keyed like ``named_parameters()``/``named_buffers()``; stacked parameters
    are new leaves that require grad when the originals do (torch.func's behaviour). For a JAX ensemble, pass
    ``lf.utils.jax.to_jax(params)`` to ``jax.vmap(lambda p, x: functional_call(base, p, (x,)))``.

    Raises:
        ArgumentError: no models, models of different classes, or different parameter names or shapes.
    """
    models = list(models)
    if not models:
        raise ArgumentError("stack_module_state: expected at least one model, got 0")
    first = models[0]
    for m in models[1:]:
        if type(m) is not type(first):
            raise ArgumentError(
                f"stack_module_state: all models must be of the same class, got {type(first).__name__} and "
                f"{type(m).__name__}"
            )
        if m.training != first.training:
            raise ArgumentError("stack_module_state: all models must be in the same mode (train or eval)")

    def stack(named):
        lists = [dict(named(m)) for m in models]
        keys = list(lists[0])
        for d in lists[1:]:
            if list(d) != keys:
                raise ArgumentError(f"stack_module_state: models have different names: {keys} vs {list(d)}")
        out = {}
        for k in keys:
            shapes = {tuple(d[k].shape) for d in lists}
            if len(shapes) > 1:
                raise ArgumentError(f"stack_module_state: {k!r} has different shapes across models: {sorted(shapes)}")
            out[k] = _make(jnp.stack([d[k]._value for d in lists]))
        return out, lists

    params, plists = stack(lambda m: m.named_parameters())
    for k, t in params.items():
        if plists[0][k].requires_grad:
            t.requires_grad_(True)
    buffers, _ = stack(lambda m: m.named_buffers())
    return params, buffers
