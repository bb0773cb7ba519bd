"""``backward`` and ``grad``: entry points into the tape engine; ``Function`` and ``once_differentiable``
(defined in ``_custom``) under torch's module name ``torch.autograd.function``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.core import Tracer

from .._core.errors import AutogradError
from .._ingress import array as owned_array
from .._tensor import Tensor, _make
from ._custom import Function, FunctionCtx, once_differentiable
from .engine import run_backward

__all__ = ["backward", "grad", "Function", "FunctionCtx", "once_differentiable"]


_ONES: dict = {}  # (shape, dtype, placement) -> a ones array: the implicit seed of backward(), built once per kind


def _ones_like(o: Tensor):
    """``ones_like(o)`` without a JAX eager op per call (~100 us): seeds are immutable, so one array per kind is
    shared. A donating caller never consumes it: donation copies any buffer referenced elsewhere (refs.owned)."""
    v = o._value
    if not isinstance(v, jax.Array) or isinstance(v, Tracer):
        return jnp.ones_like(v)
    key = o._meta
    seed = _ONES.get(key)
    if seed is None or seed.is_deleted():
        if len(_ONES) >= 64:
            _ONES.clear()
        seed = _ONES[key] = jnp.ones_like(v)
    return seed


def _root_grads(outputs, grad_outputs, create_graph):
    gs = []
    for i, o in enumerate(outputs):
        g = grad_outputs[i] if grad_outputs is not None else None
        if g is None:
            if o.numel() != 1:
                raise AutogradError(
                    f"grad can be implicitly created only for scalar outputs; output {i} has shape "
                    f"{list(o.shape)}: pass gradient= (or grad_outputs=) with that shape"
                )
            g = _make(_ones_like(o))
        else:
            g = g if isinstance(g, Tensor) else _make(owned_array(g, copy=False))
            if g.shape != o.shape:
                raise AutogradError(f"gradient has shape {list(g.shape)} but the output has shape {list(o.shape)}")
            if g.dtype is not o.dtype:
                g = g.to(o.dtype)
        gs.append(g if create_graph else g._value)
    return gs


def backward(
    tensors, grad_tensors=None, retain_graph: bool | None = None, create_graph: bool = False, inputs=None
) -> None:
    """Accumulate gradients of ``tensors`` into the leaves' ``.grad`` (``torch.autograd.backward``)."""
    outs = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    if grad_tensors is not None and isinstance(grad_tensors, Tensor):
        grad_tensors = [grad_tensors]
    for o in outs:
        if not o._rg:
            raise AutogradError(
                "element 0 of tensors does not require grad and does not have a grad_fn: "
                "nothing to differentiate (did you forget requires_grad=True, or run under "
                "lf.no_grad()?)"
            )
    retain = create_graph if retain_graph is None else retain_graph
    gs = _root_grads(outs, grad_tensors, create_graph)
    if inputs is not None:
        inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
        cap = {id(t): None for t in inputs}
        run_backward(outs, gs, retain_graph=retain, create_graph=create_graph, capture=cap)
        for t in inputs:
            g = cap[id(t)]
            if g is not None:
                g = g if isinstance(g, Tensor) else _make(g, t._meta)
                t.grad = g if t.grad is None else t.grad + g
        return
    run_backward(outs, gs, retain_graph=retain, create_graph=create_graph)


def grad(
    outputs,
    inputs,
    grad_outputs=None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool | None = None,
    materialize_grads: bool = False,
):
    """Gradients of ``outputs`` with respect to ``inputs``, without touching ``.grad``
    (``torch.autograd.grad``).

    Returns:
        A tuple with one gradient Tensor (or None if unused and ``allow_unused``) per input.
    Raises:
        AutogradError: an input is unused and ``allow_unused`` is False, or an output needs no grad.
    """
    outs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    single = isinstance(inputs, Tensor)
    ins = [inputs] if single else list(inputs)
    if isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs]
    for t in ins:
        if not isinstance(t, Tensor) or not t._rg:
            raise AutogradError("one of the differentiated Tensors does not require grad")
    for o in outs:
        if not o._rg:
            raise AutogradError("element 0 of tensors does not require grad and does not have a grad_fn")
    retain = create_graph if retain_graph is None else retain_graph
    gs = _root_grads(outs, grad_outputs, create_graph)
    cap = {id(t): None for t in ins}
    run_backward(outs, gs, retain_graph=retain, create_graph=create_graph, capture=cap)
    res = []
    for i, t in enumerate(ins):
        g = cap[id(t)]
        if g is None:
            if materialize_grads:
                res.append(_make(jnp.zeros_like(t._value)))
                continue
            if not allow_unused:
                raise AutogradError(
                    f"input {i} (shape {list(t.shape)}) was not used in the graph; pass "
                    "allow_unused=True to get None for it"
                )
            res.append(None)
        else:
            res.append(g if isinstance(g, Tensor) else _make(g, t._meta))
    return tuple(res)
