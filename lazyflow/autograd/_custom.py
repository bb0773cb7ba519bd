"""``lf.autograd.Function``: a user-defined op with its own backward (torch's ``torch.autograd.Function``).

Eagerly, ``apply`` runs ``forward`` once with gradient recording off and puts one tape node on the outputs; the
engine calls the user's ``backward`` with the ctx of that call (under ``create_graph`` with recording on, so a
differentiable backward can itself be differentiated). Inside a JAX trace (``lf.compile``, ``lf.nn.Graph``,
``lf.func`` transforms) the call becomes a ``jax.custom_vjp`` whose backward is the user's ``backward``: whatever
differentiates the program -- the graph tape, ``jax.vjp`` of a compiled program, ``lf.func.grad`` -- uses it, never
autodiff of ``forward``.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import jax
import jax.core
import jax.numpy as jnp
import numpy as np

from .._core.context import state
from .._core.errors import AutogradError
from .._tensor import Tensor, _make
from ..ops.table import OpDef, backward_fn, sum_to_shape
from .node import Node

__all__ = ["Function", "FunctionCtx", "once_differentiable"]

_Tracer = jax.core.Tracer
_traced_applies = [0]  # how many Functions became a jax.custom_vjp (lf.func names them when forward mode fails)


def traced_apply_count() -> int:
    """How many ``apply`` calls have run on traced inputs so far (a ``jax.custom_vjp`` each)."""
    return _traced_applies[0]


class FunctionCtx:
    """What ``forward``/``setup_context`` stores for ``backward`` (torch's ``ctx``)."""

    def __init__(self, needs_input_grad: tuple[bool, ...]):
        self.needs_input_grad = needs_input_grad
        self.materialize_grads = True
        self._saved: tuple = ()
        self._saved_versions: tuple = ()
        self._non_diff: set[int] = set()
        self._dirty: set[int] = set()
        self._freed = False

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        """Keep ``tensors`` (Tensors or None) for ``backward``, read back as ``ctx.saved_tensors``."""
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise AutogradError(
                    f"save_for_backward can only save tensors (or None), but argument {i} is a {type(t).__name__}; "
                    "store other values as attributes of ctx"
                )
        self._saved = tensors
        self._saved_versions = tuple(None if t is None else t._version for t in tensors)

    @property
    def saved_tensors(self) -> tuple:
        if self._freed:
            raise AutogradError(
                "trying to backward through the graph a second time (or directly access saved tensors after they "
                "have already been freed); pass retain_graph=True to the first backward"
            )
        for t, v in zip(self._saved, self._saved_versions):
            if t is not None and t._version != v:
                raise AutogradError(
                    f"one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: a tensor of shape {list(t.shape)} saved with save_for_backward is at version "
                    f"{t._version}; expected version {v}. Use an out-of-place op or .clone() first"
                )
        return tuple(self._saved)

    def mark_non_differentiable(self, *args: Tensor) -> None:
        """Outputs that get no gradient (indices, masks): they do not require grad, and ``backward`` receives
        zeros (or None without materialized grads) for them."""
        self._non_diff.update(id(a) for a in args)

    def mark_dirty(self, *args: Tensor) -> None:
        """Inputs that ``forward`` modified in place and returns: the returned object is the input itself."""
        self._dirty.update(id(a) for a in args)

    def set_materialize_grads(self, value: bool) -> None:
        """True (default): gradients of unused outputs reach ``backward`` as zeros; False: as None."""
        self.materialize_grads = bool(value)


def once_differentiable(fn):
    """Decorate a ``backward`` that cannot itself be differentiated: it runs with recording off, and a double
    backward through its results raises (torch's ``torch.autograd.function.once_differentiable``)."""

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        prev = state.grad_enabled
        state.grad_enabled = False
        try:
            out = fn(ctx, *args)
        finally:
            state.grad_enabled = prev
        if not prev or state.tracing:
            return out
        if not any(isinstance(a, Tensor) and a._rg for a in args):
            return out
        outs = out if isinstance(out, tuple) else (out,)
        res = tuple(_dead_end(o, type(ctx).__name__) if isinstance(o, Tensor) else o for o in outs)
        return res if isinstance(out, tuple) else res[0]

    wrapper._once_differentiable = True  # type: ignore[attr-defined]
    return wrapper


class _DeadEntry:
    """Tape record on the results of a ``once_differentiable`` backward: differentiating them raises."""

    diff = (0,)

    def __init__(self, name: str):
        self.name = self.node_name = f"{name}OnceDifferentiableBackward"

    def custom_backward(self, node, gs, create_graph, retain_graph):
        raise AutogradError(
            "trying to differentiate twice a function that was marked with @once_differentiable; remove the "
            "decorator if its backward is differentiable"
        )


def _dead_end(t: Tensor, name: str) -> Tensor:
    out = _make(t._value, t._meta)
    marker = _make(t._value, t._meta)
    marker._rg = True
    node = Node(_DeadEntry(name), (marker,), (None,), 1, (0,))
    out._rg, out._node, out._oidx = True, node, 0
    return out


def _is_float(meta) -> bool:
    return meta[1].is_inexact


class _ArgSpec:
    __slots__ = ("tensor", "shape", "dtype", "kind")

    def __init__(self, a):
        self.tensor = isinstance(a, Tensor)
        self.shape = tuple(a.shape) if self.tensor else ()
        self.dtype = a.dtype if self.tensor else None
        self.kind = type(a).__name__


class _Signature:
    """Static facts about one ``apply`` call: argument kinds and the outputs' layout."""

    def __init__(self, cls, args):
        self.cls = cls
        self.name = f"{cls.__name__}Backward"
        # what backward's results are checked against: each tensor argument's (shape, dtype), else its type name --
        # not the arguments themselves, which the node must not keep alive
        self.specs = tuple(_ArgSpec(a) for a in args)
        self.tpos = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))


def _run_forward(cls, ctx: FunctionCtx, args: tuple):
    prev = state.grad_enabled
    state.grad_enabled = False
    try:
        if _new_style(cls):
            out = cls.forward(*args)
            cls.setup_context(ctx, args, out)
        else:
            out = cls.forward(ctx, *args)
    finally:
        state.grad_enabled = prev
    return out


def _new_style(cls) -> bool:
    return cls.setup_context is not Function.setup_context


def _check_grads(name: str, args: tuple[_ArgSpec, ...], res, create_graph: bool) -> list:
    """The user's gradients, one per input, validated, cast and summed to each input's shape."""
    if not isinstance(res, tuple):
        res = (res,)
    n = len(args)
    if len(res) > n and all(r is None for r in res[n:]):
        res = res[:n]
    if len(res) != n:
        raise AutogradError(
            f"function {name} returned an incorrect number of gradients (expected {n}, got {len(res)}): backward "
            "must return one gradient (or None) per argument of forward"
        )
    out = []
    for i, (a, g) in enumerate(zip(args, res)):
        if g is None:
            out.append(None)
            continue
        if not a.tensor:
            raise AutogradError(
                f"function {name} returned a gradient different than None at position {i}, but the corresponding "
                f"forward input was not a Tensor (a {a.kind}); return None for it"
            )
        if not isinstance(g, Tensor):
            raise AutogradError(
                f"function {name} returned a {type(g).__name__} as the gradient at position {i}; expected a Tensor "
                "or None"
            )
        shape = a.shape
        if tuple(g.shape) != shape:
            try:
                ok = np.broadcast_shapes(shape, tuple(g.shape)) == tuple(g.shape)
            except ValueError:
                ok = False
            if not ok:
                raise AutogradError(
                    f"Function {name} returned an invalid gradient at index {i} - got {list(g.shape)} but expected "
                    f"shape compatible with {list(shape)}"
                )
            g = _sum_to(g, shape) if create_graph else _make(sum_to_shape(g._value, shape))
        dt = a.dtype
        if dt is not None and g.dtype is not dt and dt.is_inexact:
            g = g.to(dt)
        out.append(g)
    return out


def _sum_to(g: Tensor, shape: tuple) -> Tensor:
    lead = g.dim() - len(shape)
    if lead:
        g = g.sum(dim=tuple(range(lead)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    return g.sum(dim=axes, keepdim=True) if axes else g


class _EagerEntry:
    """The tape record of one eager ``apply``: the engine calls :meth:`custom_backward` with the outputs' grads."""

    def __init__(self, sig: _Signature, ctx: FunctionCtx, out_metas: list, diff: tuple[int, ...]):
        self.sig, self.ctx, self.out_metas, self.diff = sig, ctx, out_metas, diff
        self.name = self.node_name = sig.name

    def custom_backward(self, node, gs, create_graph: bool, retain_graph: bool):
        ctx = self.ctx
        grads = []
        for g, meta in zip(gs, self.out_metas):
            if g is None:
                g = (
                    _make(jnp.zeros(meta[0], meta[1].to_jax()), meta)
                    if meta is not None and ctx.materialize_grads
                    else None
                )
            elif not isinstance(g, Tensor):
                g = _make(g, meta)
            grads.append(g)
        prev = state.grad_enabled
        state.grad_enabled = create_graph
        try:
            res = self.sig.cls.backward(ctx, *grads)
        finally:
            state.grad_enabled = prev
        checked = _check_grads(self.sig.name, self.sig.specs, res, create_graph)
        if not retain_graph:
            ctx._freed = True
        outs = []
        for pos in node.diff:
            g = checked[pos]
            outs.append(None if g is None else (g if create_graph else g._value))
        return outs


class _TraceEntry:
    """The tape record of a traced ``apply`` (``lf.nn.Graph``'s tape): its backward is ``jax.vjp`` of the call's
    ``jax.custom_vjp`` function, i.e. the user's ``backward``."""

    def __init__(self, name: str, op: OpDef, descs: tuple, diff: tuple[int, ...]):
        self.name = self.node_name = name
        self.op, self.descs, self.diff = op, descs, diff

    def bwd_call(self, vals, gs, diff=None):
        return backward_fn(self.op, (), self.descs, self.diff if diff is None else diff)(*vals, *gs)

    def bwd_op(self, diff=None) -> OpDef:
        fn = backward_fn(self.op, (), self.descs, self.diff if diff is None else diff)
        return OpDef(f"{self.name}_backward", fn, dtypes="none")


class Function:
    """Base class of a custom autograd op: subclass it with static ``forward`` and ``backward``, call ``apply``.

    ``forward(ctx, *args)`` (or ``forward(*args)`` plus ``setup_context(ctx, inputs, output)``) computes the
    outputs with recording off; ``backward(ctx, *grad_outputs)`` returns one gradient (or None) per argument of
    ``forward``.

    >>> class Exp(lf.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         y = x.exp()
    ...         ctx.save_for_backward(y)
    ...         return y
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         (y,) = ctx.saved_tensors
    ...         return g * y
    >>> Exp.apply(lf.ones(2, requires_grad=True)).sum().backward()
    """

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        raise AutogradError(
            "Legacy autograd function with non-static forward method is deprecated. Please use new-style "
            f"autograd function with static forward method: call {type(self).__name__}.apply(...)"
        )

    @staticmethod
    def forward(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> Any:
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom autograd.Function to use it with "
            "backward mode AD."
        )

    vjp = backward

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Run ``forward`` on ``args`` and record ``backward`` for the outputs."""
        if kwargs:  # bound to forward's parameters and passed positionally, as torch does
            old = not _new_style(cls)
            bound = inspect.signature(cls.forward).bind(*((None,) if old else ()), *args, **kwargs)
            bound.apply_defaults()
            vals = list(bound.arguments.values())
            args = tuple(vals[1:] if old else vals)
        if any(isinstance(a, Tensor) and isinstance(a._value, _Tracer) for a in args):
            return _apply_traced(cls, args)
        return _apply_eager(cls, args)


def _flat_out(out):
    return (out, True) if isinstance(out, tuple) else ((out,), False)


def _apply_eager(cls, args: tuple):
    sig = _Signature(cls, args)
    grad_on = state.grad_enabled
    needs = tuple(isinstance(a, Tensor) and a._rg and grad_on for a in args)
    ctx = FunctionCtx(needs)
    out = _run_forward(cls, ctx, args)
    outs, is_tuple = _flat_out(out)
    if not any(needs):
        return out
    diff = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor) and a._rg and _is_float(a._meta))
    if not diff:
        return out
    in_ids = {id(a) for a in args if isinstance(a, Tensor)}
    res = list(outs)
    for i, o in enumerate(res):
        if isinstance(o, Tensor) and id(o) in in_ids and id(o) not in ctx._dirty:
            res[i] = _make(o._value, o._meta)  # an input returned as it is: a new tensor, as torch's view of it
    out_metas = [o._meta if isinstance(o, Tensor) else None for o in res]
    entry = _EagerEntry(sig, ctx, out_metas, diff)
    # only the inputs that get a gradient are kept (the engine reads those); backward checks against sig.specs
    inputs = tuple(a if i in diff else None for i, a in enumerate(args))
    node = Node(entry, inputs, (None,) * len(args), len(res), diff)
    for i, o in enumerate(res):
        if not isinstance(o, Tensor):
            continue
        if id(o) in ctx._dirty and o._rg and o._node is None:
            raise AutogradError(
                "a leaf Variable that requires grad has been used in an in-place operation (marked dirty in "
                f"{cls.__name__}.forward); clone it first"
            )
        if _is_float(o._meta) and id(o) not in ctx._non_diff and id(outs[i]) not in ctx._non_diff:
            o._rg, o._node, o._oidx = True, node, i
    return tuple(res) if is_tuple else res[0]


def _apply_traced(cls, args: tuple):
    _traced_applies[0] += 1
    sig = _Signature(cls, args)
    tpos = sig.tpos
    tensors = [args[i] for i in tpos]
    needs = tuple(isinstance(a, Tensor) and _is_float(a._meta) for a in args)
    interp = state.interp
    layout: dict = {}

    def run(vals):
        full = list(args)
        for i, v in zip(tpos, vals):
            full[i] = _make(v)
        ctx = FunctionCtx(needs)
        prev = state.grad_enabled
        state.grad_enabled = False
        try:
            out = _run_forward(cls, ctx, tuple(full))
        finally:
            state.grad_enabled = prev
        outs, is_tuple = _flat_out(out)
        layout["tuple"] = is_tuple
        layout["outs"] = [None if isinstance(o, Tensor) else o for o in outs]
        layout["diff"] = [isinstance(o, Tensor) and _is_float(o._meta) and id(o) not in ctx._non_diff for o in outs]
        layout["metas"] = [o._meta if isinstance(o, Tensor) else None for o in outs]
        return ctx, tuple(o._value for o in outs if isinstance(o, Tensor))

    @jax.custom_vjp
    def fn(*vals):
        return run(vals)[1]

    def fwd(*vals):
        ctx, ovals = run(vals)
        saved = [t._value if isinstance(t, Tensor) else None for t in ctx._saved]
        attrs = {k: v._value for k, v in vars(ctx).items() if isinstance(v, Tensor)}
        layout["ctx"] = ctx
        return ovals, (saved, attrs, vals)

    def bwd(resid, cts):
        saved, attrs, vals = resid
        ctx = layout["ctx"]
        ctx._saved = tuple(None if v is None else _make(v) for v in saved)
        ctx._saved_versions = tuple(None if v is None else 0 for v in saved)
        for k, v in attrs.items():
            setattr(ctx, k, _make(v))
        it = iter(cts)
        grads = []
        for m in layout["metas"]:
            if m is None:
                grads.append(None)
                continue
            c = next(it)
            if not _is_float(m) or (isinstance(c, np.ndarray) and c.dtype == jax.dtypes.float0):
                c = jnp.zeros(m[0], m[1].to_jax() if _is_float(m) else jnp.float32)
            grads.append(_make(c))
        prev = (state.interp, state.tracing, state.grad_enabled)
        state.interp, state.tracing, state.grad_enabled = interp, True, False
        try:
            res = cls.backward(ctx, *grads)
            checked = _check_grads(sig.name, sig.specs, res, False)
        finally:
            state.interp, state.tracing, state.grad_enabled = prev
        out = []
        for i, v in zip(tpos, vals):
            g = checked[i]
            if not jnp.issubdtype(v.dtype, jnp.inexact):
                out.append(np.zeros(v.shape, jax.dtypes.float0))
            else:
                out.append(jnp.zeros(v.shape, v.dtype) if g is None else g._value)
        return tuple(out)

    fn.defvjp(fwd, bwd)
    ovals = fn(*[t._value for t in tensors])
    it = iter(ovals)
    res = [_make(next(it)) if o is None else o for o in layout["outs"]]
    if state.grad_enabled and any(t._rg for t in tensors):
        op = OpDef(sig.name, fn, dtypes="none")
        descs = tuple(t._meta for t in tensors)
        tdiff = tuple(j for j, t in enumerate(tensors) if t._rg and _is_float(t._meta))
        node = Node(_TraceEntry(sig.name, op, descs, tdiff), tuple(tensors), (None,) * len(tensors), len(ovals), tdiff)
        k = 0
        for o, d in zip(res, layout["diff"]):
            if isinstance(o, Tensor):
                if d:
                    o._rg, o._node, o._oidx = True, node, k
                k += 1
    return tuple(res) if layout["tuple"] else res[0]
