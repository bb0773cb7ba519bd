"""``lf.onnx.export``: torch.onnx.export's signature, lowered from the model's jaxpr one primitive at a time.

The model is traced (in eval mode) by graph mode's interpreter into a pure JAX function, ``jax.make_jaxpr`` gives
its jaxpr, and each equation becomes ONNX nodes through the rule table in :mod:`._lower`; parameters and buffers
become initializers named by their state-dict keys. ``dynamic_axes`` traces with ``jax.export`` symbolic
dimensions, so shapes that depend on a dynamic axis are computed in the graph at run time. Needs the ``onnx``
extra (``pip install lazyflow[onnx]``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import IO

import jax
import numpy as np
from jax.errors import InconclusiveDimensionOperation

try:
    import onnx
except ImportError as e:  # the optional extra
    raise ImportError("lf.onnx needs the onnx package: pip install 'lazyflow[onnx]' (or pip install onnx)") from e

from .._core.errors import ArgumentError
from ..export._program import Dim, abstract_inputs
from ..export._pure import ExportError, check_inputs, eval_mode, pure_function, state_of
from ._lower import RULES
from ._model import to_model

__all__ = ["export", "ExportError", "RULES", "DEFAULT_OPSET", "MIN_OPSET"]

DEFAULT_OPSET = 18
MIN_OPSET = 18  # Reduce* take their axes as an input from opset 18 on


def _names(given, n: int, prefix: str, what: str) -> list[str]:
    if given is None:
        return [f"{prefix}{i}" for i in range(n)]
    given = list(given)
    if len(given) > n or not all(isinstance(x, str) for x in given) or len(set(given)) != len(given):
        raise ArgumentError(f"lf.onnx.export: {what} must be at most {n} distinct strings, got {given!r}")
    return given + [f"{prefix}{i}" for i in range(len(given), n)]


def _axes(dynamic_axes, name: str) -> dict[int, str]:
    """torch's ``dynamic_axes`` entry for one input/output: a list of axes or a dict ``{axis: name}``."""
    spec = (dynamic_axes or {}).get(name)
    if spec is None:
        return {}
    if isinstance(spec, Mapping):
        return {int(a): str(d) for a, d in spec.items()}
    if isinstance(spec, Sequence):
        return {int(a): f"{name}_dynamic_axes_{i + 1}" for i, a in enumerate(spec)}
    raise ArgumentError(f"lf.onnx.export: dynamic_axes[{name!r}] must be a list of axes or a dict, got {spec!r}")


def export(
    model,
    args=(),
    f: str | os.PathLike | IO[bytes] | None = None,
    *,
    kwargs: None = None,
    verbose: bool | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    opset_version: int | None = None,
    export_params: bool = True,
    dynamic_axes: Mapping[str, Sequence[int] | Mapping[int, str]] | None = None,
) -> onnx.ModelProto | None:
    """Export ``model`` (an ``lf.nn.Module`` in eval mode, or a function of tensors) to an ONNX file.

    Args:
        model: the module (its train/eval flags are restored afterwards) or function.
        args: example inputs: a tensor or a tuple of tensors.
        f: a path or a binary file object; None returns the ``onnx.ModelProto`` instead of writing it.
        kwargs: keyword inputs are not supported (pass every input positionally).
        input_names, output_names: graph input/output names (default ``input0``..., ``output0``...).
        dynamic_axes: ``{name: {axis: dim_name}}`` or ``{name: [axis, ...]}`` for inputs and outputs; those axes may
            take any size when the file runs.
        opset_version: ONNX opset, at least 18 (the default).
        export_params: must be True (parameters are always stored as initializers).
        verbose: accepted for torch's signature.

    Raises:
        ExportError: an op without an ONNX lowering (naming the op and the model's line), random draws, buffer writes.
        ArgumentError: bad names, axes or opset.

    >>> lf.onnx.export(model, (x,), "model.onnx", input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    """
    what = "lf.onnx.export"
    if kwargs:
        raise ArgumentError(f"{what}: keyword inputs are not supported; pass every input positionally in args")
    opset = DEFAULT_OPSET if opset_version is None else opset_version
    if not isinstance(opset, int) or opset < MIN_OPSET:
        raise ArgumentError(f"{what}: opset_version must be an int >= {MIN_OPSET}, got {opset_version!r}")
    if not export_params:
        raise ArgumentError(f"{what}: export_params=False is not supported; parameters become initializers")
    args = check_inputs(args, what)
    in_names = _names(input_names, len(args), "input", "input_names")
    dims: dict[str, dict[int, Dim]] = {}
    symbols: dict[str, Dim] = {}  # one jax symbol per distinct dim name (any string torch allows)
    for n in in_names:
        for ax, d in _axes(dynamic_axes, n).items():
            dims.setdefault(n, {})[ax] = symbols.setdefault(d, Dim(f"dyn{len(symbols)}"))
    specs = abstract_inputs(model, args, tuple(dims.get(n) for n in in_names), what)
    state = state_of(model)
    names = list(state)
    params = {n: np.asarray(t.jax()) for n, t in state.items()}
    pspecs = {n: jax.ShapeDtypeStruct(v.shape, v.dtype) for n, v in params.items()}
    fn = pure_function(model, names, what)
    with eval_mode(model):
        try:
            closed = jax.make_jaxpr(fn)(pspecs, *specs)
        except InconclusiveDimensionOperation as e:
            raise ExportError(f"{what}: the model's code depends on a dynamic axis' value: {e}") from e
    out_names = _names(output_names, len(closed.out_avals), "output", "output_names")
    unknown = set(dynamic_axes or {}) - set(in_names) - set(out_names)
    if unknown:
        raise ArgumentError(
            f"{what}: dynamic_axes names {sorted(unknown)}, which are neither inputs {in_names} nor outputs "
            f"{out_names}; key it by input_names/output_names"
        )
    pnames = sorted(names)  # a dict's leaves come in sorted-key order
    proto = to_model(
        closed,
        [(n, params[n]) for n in pnames],
        [(n, s.shape, _axes(dynamic_axes, n)) for n, s in zip(in_names, specs)],
        [(n, _axes(dynamic_axes, n)) for n in out_names],
        opset=opset,
        name=getattr(model, "_get_name", lambda: "lazyflow_model")(),
    )
    if f is None:
        return proto
    onnx.save_model(proto, f)
    return None
