"""``lf.export.export``: a module or function as a serialized StableHLO program (``jax.export``) plus its weights."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax.errors import InconclusiveDimensionOperation

from .._core.dtypes import from_jax_dtype
from .._core.errors import ArgumentError, DTypeError, ShapeError
from .._creation import tensor
from .._tensor import Tensor, from_jax
from ._pure import ExportError, check_inputs, eval_mode, pure_function, state_of

__all__ = ["Dim", "ExportedProgram", "export", "PLATFORMS"]

# lowered for both: the saved program runs on a CPU-only machine and on an NVIDIA GPU
PLATFORMS = ("cpu", "cuda")


class Dim:
    """A dynamic dimension (torch.export's ``Dim``): the axis may take any size in ``[min, max]`` at call time.

    >>> batch = lf.export.Dim("batch")
    >>> ep = lf.export.export(model, (x,), dynamic_shapes={"x": {0: batch}})
    """

    def __init__(self, name: str, *, min: int | None = None, max: int | None = None) -> None:
        if not (isinstance(name, str) and name.isidentifier()):
            raise ArgumentError(f"Dim expects an identifier as its name, got {name!r}")
        self.name, self.min, self.max = name, min, max

    def __repr__(self) -> str:
        return f"Dim({self.name!r}, min={self.min}, max={self.max})"


def _arg_names(model, n: int) -> list[str]:
    fn = model.forward if hasattr(model, "forward") else model
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return [f"arg{i}" for i in range(n)]
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return names[:n] + [f"arg{i}" for i in range(len(names), n)]


def _per_arg(dynamic_shapes, names: list[str]) -> list[Mapping]:
    """``dynamic_shapes`` (dict by argument name, or a tuple/list by position) as one ``{axis: Dim}`` per arg."""
    if dynamic_shapes is None:
        return [{} for _ in names]
    if isinstance(dynamic_shapes, Mapping):
        unknown = set(dynamic_shapes) - set(names)
        if unknown:
            raise ArgumentError(
                f"dynamic_shapes names {sorted(unknown)}, but the inputs are {names}; key it by the forward's "
                "argument names or pass a tuple with one entry per input"
            )
        per = [dynamic_shapes.get(n) for n in names]
    elif isinstance(dynamic_shapes, Sequence) and not isinstance(dynamic_shapes, str):
        if len(dynamic_shapes) != len(names):
            raise ArgumentError(f"dynamic_shapes has {len(dynamic_shapes)} entries for {len(names)} inputs")
        per = list(dynamic_shapes)
    else:
        raise ArgumentError(f"dynamic_shapes must be a dict or a tuple, got {type(dynamic_shapes).__name__}")
    out = []
    for n, spec in zip(names, per):
        if spec is None:
            spec = {}
        elif isinstance(spec, (tuple, list)):
            spec = {i: d for i, d in enumerate(spec) if d is not None}
        if not isinstance(spec, Mapping) or not all(isinstance(d, Dim) for d in spec.values()):
            raise ArgumentError(
                f"dynamic_shapes[{n!r}] must map axes to lf.export.Dim (e.g. {{0: Dim('batch')}}), got {spec!r}"
            )
        out.append(spec)
    return out


def abstract_inputs(model, args: tuple[Tensor, ...], dynamic_shapes, what: str):
    """``jax.ShapeDtypeStruct`` per input, with jax.export symbolic dims where ``dynamic_shapes`` asks."""
    names = _arg_names(model, len(args))
    per = _per_arg(dynamic_shapes, names)
    dims = {d.name: d for spec in per for d in spec.values()}
    constraints = [f"{d.name} >= {d.min}" for d in dims.values() if d.min is not None]
    constraints += [f"{d.name} <= {d.max}" for d in dims.values() if d.max is not None]
    scope = jax.export.SymbolicScope(constraints)
    specs = []
    for n, a, spec in zip(names, args, per):
        for ax in spec:
            if not (isinstance(ax, int) and 0 <= ax < a.ndim):
                raise ArgumentError(f"{what}: dynamic_shapes[{n!r}] names axis {ax!r}; input {n!r} has {a.ndim} axes")
        if spec:
            text = ", ".join(spec[i].name if i in spec else str(s) for i, s in enumerate(a.shape))
            shape = jax.export.symbolic_shape(text, scope=scope)
        else:
            shape = tuple(a.shape)
        specs.append(jax.ShapeDtypeStruct(shape, a.jax().dtype))
    return specs


class ExportedProgram:
    """A serialized StableHLO program and its weights; call it like the module (no Python class needed).

    Attributes:
        exported: the ``jax.export.Exported`` (``.mlir_module()`` shows the StableHLO text).
        state_dict: the parameters and buffers the program reads, by dotted name (a copy taken at export).
    """

    def __init__(self, exported: jax.export.Exported, state_dict: dict[str, Tensor]) -> None:
        self.exported = exported
        self.state_dict = state_dict
        self._params = {k: v.jax() for k, v in state_dict.items()}
        self._call = jax.jit(exported.call)  # Exported.call re-traces its wrapper on every call; jit caches it

    @property
    def input_specs(self) -> list[tuple[tuple, str]]:
        """``(shape, dtype name)`` per input; a dynamic axis shows its Dim name."""
        n = len(self.state_dict)
        return [(tuple(str(d) for d in a.shape), str(a.dtype)) for a in self.exported.in_avals[n:]]

    def module(self) -> Callable[..., Any]:
        """A callable running the program (torch's ``ExportedProgram.module()``): this object itself."""
        return self

    def _check(self, args) -> list:
        avals = self.exported.in_avals[len(self.state_dict) :]
        if len(args) != len(avals):
            raise ArgumentError(f"the exported program takes {len(avals)} input(s), got {len(args)}")
        vals = []
        for i, (a, av) in enumerate(zip(args, avals)):
            v = (a if isinstance(a, Tensor) else tensor(a)).jax()  # lf.tensor: the one ingress (copies)
            want = tuple(str(d) for d in av.shape)
            if v.dtype != av.dtype:
                raise DTypeError(
                    f"exported program input {i}: expected dtype {from_jax_dtype(av.dtype)}, got "
                    f"{from_jax_dtype(v.dtype)}; convert it with .to({from_jax_dtype(av.dtype)})"
                )
            bad = len(v.shape) != len(av.shape) or any(isinstance(d, int) and d != s for d, s in zip(av.shape, v.shape))
            if bad:
                raise ShapeError(
                    f"exported program input {i}: expected shape ({', '.join(want)}), got {tuple(v.shape)}; "
                    "only the axes exported as dynamic (lf.export.Dim) may change"
                )
            vals.append(v)
        return vals

    def __call__(self, *args):
        vals = self._check(args)
        try:
            out = self._call(self._params, *vals)
        except ValueError as e:  # symbolic constraints (two inputs sharing a Dim disagree, Dim min/max)
            raise ShapeError(f"exported program inputs {[tuple(v.shape) for v in vals]}: {e}") from e
        return jax.tree_util.tree_map(from_jax, out)

    def __repr__(self) -> str:
        return f"ExportedProgram(inputs={self.input_specs}, platforms={self.exported.platforms})"


def export(
    mod: Callable[..., Any], args, kwargs: None = None, *, dynamic_shapes=None, strict: bool = False
) -> ExportedProgram:
    """Trace a module (in eval mode) or a function of tensors into a serialized StableHLO program.

    The program takes the module's parameters and buffers as inputs (stored beside it in
    :attr:`ExportedProgram.state_dict`), is lowered for CPU and CUDA, and is deterministic: a forward that
    draws random numbers or writes a buffer raises. The module's train/eval flags are restored afterwards.

    Args:
        mod: an ``lf.nn.Module`` or a function of tensors returning a tensor or a tuple/list/dict of them.
        args: the example inputs (a tuple of tensors).
        kwargs, strict: accepted for torch.export's signature; keyword inputs are not supported.
        dynamic_shapes: ``{arg_name: {axis: Dim}}`` or a tuple with one ``{axis: Dim}`` (or None) per input.

    Returns:
        An :class:`ExportedProgram`; ``lf.export.save`` writes it, ``lf.export.load`` reads it back.

    Raises:
        ExportError: random draws or buffer writes in the forward.
        ArgumentError: inputs that are not tensors, or a ``dynamic_shapes`` that does not match them.

    >>> ep = lf.export.export(model, (x,), dynamic_shapes={"x": {0: lf.export.Dim("batch")}})
    >>> ep(lf.randn(7, 4))
    """
    if kwargs:
        raise ArgumentError("lf.export.export: keyword inputs are not supported; pass every input positionally")
    what = "lf.export.export"
    args = check_inputs(args, what)
    specs = abstract_inputs(mod, args, dynamic_shapes, what)
    state = state_of(mod)
    names = list(state)
    pspecs = {n: jax.ShapeDtypeStruct(tuple(t.shape), t.jax().dtype) for n, t in state.items()}
    f = pure_function(mod, names, what)
    with eval_mode(mod):
        try:
            exp = jax.export.export(jax.jit(f), platforms=PLATFORMS)(pspecs, *specs)
        except ExportError:
            raise
        except InconclusiveDimensionOperation as e:
            raise ExportError(f"{what}: the model's code depends on a dynamic dimension's value: {e}") from e
    weights = {n: from_jax(jnp.array(t.jax(), copy=True)) for n, t in state.items()}
    return ExportedProgram(exp, weights)
