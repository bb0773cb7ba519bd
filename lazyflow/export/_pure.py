"""A module (or a function of tensors) as a pure JAX function ``f(params, *args) -> outputs``.

Graph mode's pipeline (:func:`lazyflow.graph.functionalize.trace_pure`) does the work: the module's parameters and
buffers become the ``params`` dict (keyed like ``named_parameters``/``named_buffers``), the positional tensors become
arrays, and the outputs come back in the structure the module returned. Shared by :mod:`lazyflow.export` and
:mod:`lazyflow.onnx`.
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp

from .._core.errors import ArgumentError, GraphError
from .._tensor import Tensor
from ..graph.functionalize import trace_pure, traced
from ..nn.module import Module

__all__ = ["ExportError", "state_of", "pure_function", "eval_mode", "check_inputs"]


class ExportError(GraphError):
    """A model cannot be exported (random draws, state writes, an op without an ONNX lowering...)."""


def state_of(model) -> dict[str, Tensor]:
    """Every parameter and buffer (non-persistent buffers included: the program reads them), by dotted name."""
    if not isinstance(model, Module):
        return {}
    out: dict[str, Tensor] = {}
    for name, p in model.named_parameters():
        out[name] = p
    for name, b in model.named_buffers():
        out[name] = b
    return out


@contextlib.contextmanager
def eval_mode(model):
    """Run with every submodule in eval mode (torch.export users export for inference); restore the flags after."""
    if not isinstance(model, Module):
        yield
        return
    flags = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for m, t in flags:
            m.training = t


def check_inputs(example_inputs, what: str) -> tuple[Tensor, ...]:
    """The example inputs as a tuple of Tensors (a lone Tensor is one argument)."""
    if isinstance(example_inputs, Tensor):
        example_inputs = (example_inputs,)
    if not isinstance(example_inputs, (tuple, list)):
        raise ArgumentError(
            f"{what} expects the example inputs as a tuple of tensors, got {type(example_inputs).__name__}; "
            "pass (x,) for a single input"
        )
    for i, a in enumerate(example_inputs):
        if not isinstance(a, Tensor):
            raise ArgumentError(
                f"{what}: example input {i} is a {type(a).__name__}; only tensors can be program inputs "
                "(bake Python values into the model, or wrap arrays with lf.tensor)"
            )
    return tuple(example_inputs)


def pure_function(model, names: list[str], what: str):
    """``f(params: dict[name, array], *args) -> pytree of arrays`` running ``model`` under graph mode's trace.

    Raises (while ``f`` is traced) :class:`ExportError` when the model draws random numbers or writes a buffer.
    """
    state = state_of(model)
    tensors = [state[n] for n in names]

    def f(params, *args):
        vals = [params[n] for n in names]

        def body():
            return model(*(traced(a) for a in args)), None

        # random ops take traced (seed, offset) pairs; made inside the trace they are tracers. Any draw raises below.
        zero = jnp.zeros((), jnp.uint32)
        out_vals, out_tree, new_state, n_rng, _captured, _aux, _checks = trace_pure(
            body, tensors, set(), vals, zero, zero, grad=False, where=what
        )
        if n_rng:
            raise ExportError(
                f"{what}: the model draws {n_rng} random number(s) in its forward (dropout in training mode, "
                "lf.rand...); an exported program is deterministic: call model.eval() or remove the random op"
            )
        for n, old, new in zip(names, vals, new_state):
            if new is not old:
                raise ExportError(
                    f"{what}: the forward writes buffer {n!r} (BatchNorm running statistics in training mode?); "
                    "an exported program has no state to write: export with the module in eval mode"
                )
        return jax.tree_util.tree_unflatten(out_tree, out_vals)

    return f
