"""``Module.register_full_backward_hook`` / ``register_full_backward_pre_hook`` (torch's semantics).

As torch's ``BackwardHook`` does, a call of a module with backward hooks passes its positional tensor inputs and
its tensor outputs through identity ``lf.autograd.Function``s. The outputs' identity sees ``grad_output`` (one
entry per output tensor) and runs the pre-hooks, which may replace it; the inputs' identity sees ``grad_input``
(one entry per positional tensor input, None for those that need no gradient) and runs the full hooks, which may
replace it. When no input needs a gradient the full hooks run with ``grad_input`` all None, right after the
pre-hooks.
"""

from __future__ import annotations

from typing import Any

from .._core.context import state
from .._core.errors import AutogradError, GraphError, user_frame
from .._tensor import Tensor
from ..autograd.function import Function

__all__ = ["call_with_backward_hooks"]


class _Record:
    def __init__(self, module, n_inputs: int):
        self.module, self.n_inputs = module, n_inputs
        self.grad_output: tuple | None = None
        self.inputs_in_graph = False


def _check_len(res, expected: int, what: str, name: str) -> tuple:
    res = res if isinstance(res, tuple) else tuple(res) if isinstance(res, list) else (res,)
    if len(res) != expected:
        raise AutogradError(
            f"backward hook of {name} returned {len(res)} values for {what}, but expected {expected}: return a "
            "tuple with one entry per tensor (or None to keep them)"
        )
    return res


def _run_full_hooks(rec: _Record, grad_input: tuple) -> tuple:
    m = rec.module
    for hook in list(m._backward_hooks.values()):
        res = hook(m, grad_input, rec.grad_output)
        if res is not None:
            grad_input = _check_len(res, len(grad_input), "grad_input", type(m).__name__)
    return grad_input


class _OutputHook(Function):
    @staticmethod
    def forward(ctx, rec, *outs):
        ctx.rec = rec
        return outs

    @staticmethod
    def backward(ctx, *grads):
        rec = ctx.rec
        m = rec.module
        for hook in list(m._backward_pre_hooks.values()):
            res = hook(m, grads)
            if res is not None:
                grads = _check_len(res, len(grads), "grad_output", type(m).__name__)
        rec.grad_output = tuple(grads)
        if not rec.inputs_in_graph:
            _run_full_hooks(rec, (None,) * rec.n_inputs)
        return (None, *grads)


class _InputHook(Function):
    @staticmethod
    def forward(ctx, rec, *xs):
        ctx.rec = rec
        return xs

    @staticmethod
    def backward(ctx, *grads):
        rec = ctx.rec
        grad_input = tuple(g if need else None for g, need in zip(grads, ctx.needs_input_grad[1:]))
        return (None, *_run_full_hooks(rec, grad_input))


def call_with_backward_hooks(module, forward, args: tuple, kwargs: dict) -> Any:
    """Run ``forward(*args, **kwargs)`` with the module's backward hooks attached to its inputs and outputs."""
    if state.tracing and not state.grad_enabled:
        # lf.compile and lf.func trace without a tape: JAX differentiates the program, no hook could run
        raise GraphError(
            f"{type(module).__name__} has backward hooks and is called inside lf.compile or an lf.func transform at "
            f"{user_frame()}: that program is differentiated by JAX as a whole, so the hooks could never run; use "
            "lf.nn.Graph (whose backward runs on the tape), call the module eagerly, or remove the hooks first"
        )
    if not state.grad_enabled:
        return forward(*args, **kwargs)
    pos = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    rec = _Record(module, len(pos))
    if pos and any(args[i].requires_grad for i in pos):
        rec.inputs_in_graph = True
        wrapped = _InputHook.apply(rec, *[args[i] for i in pos])
        new_args = list(args)
        for i, w in zip(pos, wrapped):
            new_args[i] = w
        args = tuple(new_args)
    out = forward(*args, **kwargs)
    single = isinstance(out, Tensor)
    outs = (out,) if single else out
    if not isinstance(outs, tuple):
        return out
    tpos = [i for i, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
    if not tpos:
        return out
    wrapped = _OutputHook.apply(rec, *[outs[i] for i in tpos])
    res = list(outs)
    for i, w in zip(tpos, wrapped):
        res[i] = w
    return res[0] if single else tuple(res)
