"""The ONNX graph being built: names, constants, nodes, and shapes that may hold a dynamic dimension.

A jaxpr traced with ``jax.export`` symbolic dimensions carries expressions such as ``b`` or ``8*b`` in shape
parameters (reshape sizes, broadcast shapes). :meth:`Builder.shape` turns such a shape into an int64 ONNX tensor
computed at run time: every symbol is read from the graph input that carries it (``Shape`` + ``Gather``) and the
expression is evaluated by jax's own evaluator over :class:`_Dim` values that emit ``Mul``/``Add``/``Div`` nodes.
"""

from __future__ import annotations

import os
from typing import Any, cast

import numpy as np
import onnx
from jax._src import source_info_util  # the frames of an equation: jax has no public API for them
from jax.export import is_symbolic_dim
from onnx import helper, numpy_helper

from ..export._pure import ExportError

__all__ = ["Builder", "onnx_dtype", "where_in_model"]

_LAZYFLOW_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def onnx_dtype(dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def _frames(eqn):
    tb = eqn.source_info.traceback
    return list(source_info_util.user_frames(tb)) if tb is not None else []


def where_in_model(eqn, callers=()) -> str:
    """``file:line (function)`` of the innermost frame outside lazyflow and jax: the model's line. An equation
    inside an inlined call (a cached ``jnp`` function's jaxpr) may carry no frames: its callers' are used. A model
    built only of lazyflow's modules has no line of its own: the innermost lazyflow frame is named instead."""
    chain = [_frames(e) for e in (eqn, *reversed(callers))]
    for frames in chain:
        for fr in frames:
            if not os.path.abspath(fr.file_name).startswith(_LAZYFLOW_DIR + os.sep):
                return f"{fr.file_name}:{fr.start_line} ({fr.function_name})"
    for frames in chain:
        if frames:
            fr = frames[0]
            return f"lazyflow's {fr.file_name}:{fr.start_line} ({fr.function_name})"
    return "an unknown line"


class _Dim:
    """A run-time int64 scalar (shape ``[1]``) in the graph, with the arithmetic jax's dim evaluator uses."""

    def __init__(self, b: Builder, name: str):
        self.b, self.name = b, name

    def _op(self, op, other, swap=False):
        o = other.name if isinstance(other, _Dim) else self.b.const(np.array([int(other)], np.int64))
        a, c = (o, self.name) if swap else (self.name, o)
        return _Dim(self.b, self.b.node(op, [a, c]))

    __add__ = lambda s, o: s._op("Add", o)
    __radd__ = lambda s, o: s._op("Add", o, True)
    __mul__ = lambda s, o: s._op("Mul", o)
    __rmul__ = lambda s, o: s._op("Mul", o, True)
    __sub__ = lambda s, o: s._op("Sub", o)
    __rsub__ = lambda s, o: s._op("Sub", o, True)
    __floordiv__ = lambda s, o: s._op("Div", o)  # sizes are non-negative: truncation is floor
    __mod__ = lambda s, o: s._op("Mod", o)


class Builder:
    """Accumulates ONNX nodes and initializers; maps jaxpr variables to ONNX value names."""

    def __init__(self):
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.env: dict = {}
        self.dims: dict[str, _Dim] = {}  # symbolic dim name -> its run-time value
        self.callers: list = []  # the call equations being inlined (for error locations)
        self._n = 0
        self._consts: dict = {}

    def fresh(self, hint: str = "v") -> str:
        self._n += 1
        return f"{hint}_{self._n}"

    def node(self, op: str, inputs: list[str], **attrs) -> str:
        """Append one ONNX node with one output; returns the output's name."""
        return self.multi(op, inputs, 1, **attrs)[0]

    def multi(self, op: str, inputs: list[str], n_out: int, **attrs) -> list[str]:
        outs = [self.fresh(op.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=self.fresh("n_" + op), **attrs))
        return outs

    def const(self, value, name: str | None = None) -> str:
        arr = np.asarray(value)
        key = None
        if name is None and arr.size <= 16:  # small constants (shapes, axes, scalars) are shared
            key = (arr.dtype.str, arr.shape, arr.tobytes())
            if key in self._consts:
                return self._consts[key]
        name = name or self.fresh("c")
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        if key is not None:
            self._consts[key] = name
        return name

    def bind_dims(self, input_name: str, shape) -> None:
        """Record where each symbolic dimension of a graph input can be read at run time."""
        for ax, d in enumerate(shape):
            if is_symbolic_dim(d) and str(d) not in self.dims and str(d).isidentifier():
                s = self.node("Shape", [input_name], start=ax, end=ax + 1)
                self.dims[str(d)] = _Dim(self, s)

    def dim(self, d) -> str:
        """An int64 ``[1]`` tensor holding ``d`` (an int or a symbolic expression)."""
        if not is_symbolic_dim(d):
            return self.const(np.array([int(d)], np.int64))
        try:
            # jax's own evaluator of a dimension expression, over values that emit ONNX arithmetic (see _Dim)
            v = d._evaluate(cast(Any, self.dims))
        except KeyError as e:
            raise ExportError(
                f"lf.onnx.export: the dimension {d} uses {e}, which no input axis carries; declare it in dynamic_axes"
            ) from e
        return v.name if isinstance(v, _Dim) else self.const(np.array([int(v)], np.int64))

    def shape(self, shape) -> str:
        """An int64 1-D tensor holding ``shape``, computed at run time where it holds dynamic dimensions."""
        if not any(is_symbolic_dim(d) for d in shape):
            return self.const(np.array([int(d) for d in shape], np.int64))
        return self.node("Concat", [self.dim(d) for d in shape], axis=0)
