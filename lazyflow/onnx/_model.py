"""A closed jaxpr (weights first, then the inputs) as a checked ``onnx.ModelProto``."""

from __future__ import annotations

import numpy as np
import onnx
from jax.export import is_symbolic_dim
from onnx import helper

from ._graph import Builder, onnx_dtype
from ._lower import lower_jaxpr

__all__ = ["to_model"]


def _value_info(name: str, aval, axes: dict[int, str]):
    shape = [axes.get(i, str(d) if is_symbolic_dim(d) else int(d)) for i, d in enumerate(aval.shape)]
    return helper.make_tensor_value_info(name, onnx_dtype(aval.dtype), shape)


def to_model(closed, weights, inputs, outputs, *, opset: int, name: str) -> onnx.ModelProto:
    """Lower ``closed`` (its invars: one per weight, then one per input) to an ONNX model.

    Args:
        weights: ``(name, array)`` per leading invar: they become initializers under these names.
        inputs: ``(name, shape, {axis: dim name})`` per remaining invar (symbolic dims are read from these inputs).
        outputs: ``(name, {axis: dim name})`` per output.
    """
    b = Builder()
    inits = [b.const(np.asarray(a), name=n) for n, a in weights]
    consts = [b.const(np.asarray(c)) for c in closed.consts]
    for n, shape, _ in inputs:
        b.bind_dims(n, shape)
    in_avals = closed.in_avals[len(weights) :]
    outs = lower_jaxpr(b, closed.jaxpr, consts, inits + [n for n, _, _ in inputs])
    for o, (n, _) in zip(outs, outputs):
        b.nodes.append(helper.make_node("Identity", [o], [n], name=b.fresh("n_out")))
    used = {i for node in b.nodes for i in node.input}
    graph = helper.make_graph(
        b.nodes,
        name,
        [_value_info(n, a, axes) for (n, _, axes), a in zip(inputs, in_avals)],
        [_value_info(n, a, axes) for (n, axes), a in zip(outputs, closed.out_avals)],
        initializer=[t for t in b.inits if t.name in used],  # e.g. BatchNorm's num_batches_tracked
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="lazyflow")
    onnx.checker.check_model(proto)
    return proto
