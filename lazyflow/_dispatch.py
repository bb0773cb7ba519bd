"""What both interpreters (eager and graph) share: operand conversion, error translation, tape recording
and the in-place protocol. Neither interpreter imports the other; both import this."""

from __future__ import annotations

import builtins

import jax
import numpy as np

from ._core import dtypes as D
from ._core.errors import AutogradError, DTypeError, IndexOutOfRangeError, LazyflowError, OpError, ShapeError
from ._ingress import array as owned_array
from ._tensor import Tensor, _make, _rebind
from .autograd.node import Node
from .ops.table import OpDef, backward_fn, diff_positions

SCALAR_TYPES = frozenset({builtins.int, builtins.float, builtins.bool, type(None)})


def convert(a):
    """Non-tensor, non-scalar operands: numpy/jax arrays, lists, numpy scalars."""
    if isinstance(a, np.generic):
        return a.item()
    return _make(owned_array(a, copy=False))


def convert_all(args):
    return tuple(a if isinstance(a, Tensor) or a.__class__ in SCALAR_TYPES else convert(a) for a in args)


def _describe(args):
    return ", ".join(
        f"Tensor(shape={list(a.shape)}, dtype={a.dtype.name})" if isinstance(a, Tensor) else repr(a) for a in args
    )


_OPERAND_TYPES = frozenset({builtins.int, builtins.float, builtins.bool, builtins.complex})


def _traces_with_other_dtypes(op, args, statics) -> bool:
    """Whether ``op`` traces once its tensor operands take another dtype (default float, default int, bool): then
    the shapes were fine and the failure was about dtypes. JAX reports both kinds as TypeError, so the exception
    type alone cannot tell them apart; its message is not an API, so it is not read either."""
    kw = dict(zip(op.static, statics))
    for jd in (D.get_default_dtype().to_jax(), D.default_int().to_jax(), np.bool_):
        structs = [jax.ShapeDtypeStruct(a.shape, jd) if isinstance(a, Tensor) else a for a in args]
        try:
            jax.eval_shape(lambda *xs: op.impl(*xs, **kw), *structs)
        except Exception:  # any failure means: not with this dtype either
            continue
        return True
    return False


def translate_error(err, op, args, statics):
    """A JAX tracing error as a lazyflow error naming the op, its operands and attributes.

    Classified by what fails, not by the words of JAX's message: a failure that goes away with other operand dtypes
    is a :class:`DTypeError`; otherwise a ``TypeError``/``ValueError`` is a :class:`ShapeError` (ranks and sizes
    that do not fit) and an ``IndexError`` an :class:`IndexOutOfRangeError`; anything else an :class:`OpError`.
    """
    if isinstance(err, LazyflowError):
        return err
    if builtins.any(a is None or a.__class__ not in _OPERAND_TYPES and not isinstance(a, Tensor) for a in args):
        kinds = " and ".join(f"'{type(a).__name__}'" for a in args)
        return DTypeError(f"unsupported operand type(s) for {op.name}: {kinds} (expected tensors or numbers)")
    stat = dict(zip(op.static, statics))
    where = f"{op.name}({_describe(args)}" + (f", {stat}" if stat else "") + ")"
    msg = f"{where}: {str(err).splitlines()[0] if str(err) else type(err).__name__}"
    if isinstance(err, (TypeError, ValueError, IndexError)) and _traces_with_other_dtypes(op, args, statics):
        return DTypeError(msg)
    if isinstance(err, IndexError):
        return IndexOutOfRangeError(msg)
    if isinstance(err, (TypeError, ValueError)):
        return ShapeError(msg)
    return OpError(msg)


def record(entry, args, res, multi):
    """Attach a tape node for ``entry`` applied to ``args`` to the floating outputs ``res``.

    Operands that require grad are kept as Tensors (graph edges) and version-checked at backward time, like
    torch's saved tensors; every other tensor operand (indices, masks, running statistics, constants) is kept by
    value in a private snapshot, so a later in-place update of it neither changes this node nor counts as a
    modification (the snapshot holds the buffer, so that update copies instead of donating it).
    """
    diff = entry.diff
    for i in diff:
        if args[i]._rg:
            break
    else:  # no operand requires grad (also when diff is empty)
        return
    outs = res if multi else (res,)
    lin = entry.op.linear if hasattr(entry, "op") else False
    # one pass over the operands (this runs once per recorded op): the operands kept as graph edges, the rest
    # snapshotted; the version counters checked at backward time (an operand's value matters to the backward unless
    # the op is linear in it -- "multi": linear in each, so only with another edge beside it)
    inputs = []
    positions = []
    versions = []
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            if a._rg and i in diff:
                inputs.append(a)
                positions.append(i)
                versions.append(a._version)
                continue
            inputs.append(_make(a._value, a._meta))
        else:
            inputs.append(a)
        versions.append(None)
    if lin and not (lin == "multi" and len(positions) > 1):
        versions = (None,) * len(args)
    node = Node(entry, tuple(inputs), tuple(versions), len(outs), tuple(positions))
    for i, t in enumerate(outs):
        if t._meta[1].is_inexact:
            t._rg = True
            t._node = node
            t._oidx = i


class OpRecord:
    """An op applied with given statics to operands described by ``descs``: what a tape node needs to run the
    backward. Each interpreter subclasses it with how the backward function runs (jitted, or inline)."""

    __slots__ = ("op", "statics", "descs", "diff", "name", "_bwd", "_bwd_op")

    def __init__(self, op, statics, descs):
        self.op, self.statics, self.descs = op, statics, descs
        self.diff = diff_positions(descs)
        self.name = op.name
        self._bwd = {}  # per set of differentiated operands (only those that require grad get a gradient)
        self._bwd_op = {}

    def _make_bwd(self, diff):
        return backward_fn(self.op, self.statics, self.descs, diff)

    def bwd_call(self, vals, gs, diff=None):
        diff = self.diff if diff is None else diff
        fn = self._bwd.get(diff)
        if fn is None:
            fn = self._bwd[diff] = self._make_bwd(diff)
        return fn(*vals, *gs)

    def bwd_op(self, diff=None) -> OpDef:
        """The backward as an op of its own (applied through the interpreter under ``create_graph=True``)."""
        diff = self.diff if diff is None else diff
        o = self._bwd_op.get(diff)
        if o is None:
            o = self._bwd_op[diff] = OpDef(
                f"{self.op.name}_backward", backward_fn(self.op, self.statics, self.descs, diff), dtypes="none"
            )
        return o


def check_inplace(op, target, grad_on):
    if grad_on and target._rg and target._node is None:
        raise AutogradError(
            f"a leaf Variable that requires grad is being used in an in-place operation ({op.name}_); wrap it "
            "in `with lf.no_grad():` or operate on a clone"
        )


def snapshot(target):
    """A tensor holding ``target``'s current value and graph position (what a node must see)."""
    old = _make(target._value, target._meta)
    old._rg, old._node, old._oidx = target._rg, target._node, target._oidx
    return old


def inplace_result(op, target, out, meta):
    """Validate and cast an in-place result to the target's shape/dtype; returns ``(value, meta)``."""
    if meta[0] != target._meta[0]:
        raise ShapeError(
            f"{op.name}_: output with shape {list(target.shape)} doesn't match the broadcast shape {list(meta[0])}"
        )
    tgt, res = target._meta[1], meta[1]
    if res is not tgt:
        # torch's can_cast: a complex result never goes into a real target, a floating one never into an integer
        if (tgt.is_inexact and (tgt.is_complex or not res.is_complex)) or not (res.is_inexact or tgt.name == "bool"):
            return out.astype(target._meta[1].np), (meta[0], target._meta[1], meta[2])
        raise DTypeError(
            f"{op.name}_: result type {meta[1].name} can't be cast to the desired output type {target.dtype.name}"
        )
    return out, meta


def commit_inplace(target, out, meta, entry, args, record_grad):
    _rebind(target, out, meta)
    if record_grad:
        res = _make(out, meta)
        record(entry, args, res, False)
        if res._node is not None:
            target._rg, target._node, target._oidx = True, res._node, res._oidx
    return target


def multi_inplace_error(op):
    return OpError(f"{op.name} has several outputs and cannot run in place")
