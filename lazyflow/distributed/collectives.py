"""Eager collectives with torch.distributed's names: ``all_reduce``, ``broadcast``, ``all_gather``, ...

Each call stacks this process's value into a global array over the group's mesh (one device per process) and
runs a jitted ``shard_map`` program (``lax.psum``/``all_gather``/``all_to_all``...), compiled once per
(collective, op, group, shape, dtype). Results are written into the caller's tensors in place (same objects,
version bumped). Before each collective the ranks exchange a small signature (collective, op, shape, dtype) in
a fixed-shape program, so a mismatch raises :class:`DistributedError` naming the ranks instead of hanging.
"""

from __future__ import annotations

import functools
import zlib

import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec

from .._core.context import state
from .._core.errors import DistributedError, GraphError, NotSupportedError
from .._core.placement import sharding_of
from .._tensor import Tensor, _rebind
from .groups import AXIS, ProcessGroup, ReduceOp, group_of
from .traced import block, run_traced

__all__ = [
    "Work",
    "all_reduce",
    "broadcast",
    "reduce",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter_tensor",
    "all_to_all_single",
    "scatter",
    "gather",
    "barrier",
]

_P = PartitionSpec(AXIS)
_KINDS = {
    k: i
    for i, k in enumerate(
        ["all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter_tensor"]
        + ["all_to_all_single", "scatter", "gather", "barrier"]
    )
}
_OPS = {op: i for i, op in enumerate(ReduceOp)}
_SIG = 16
PROGRAM = 100  # signature row code of a compiled program (see lazyflow.distributed.program)
_Tracer = jax.core.Tracer


class Work:
    """The handle an ``async_op=True`` collective returns (torch's ``Work``). The result is already bound to the
    output tensors (as a pending value: JAX dispatches asynchronously); ``wait()`` blocks until it is computed."""

    def __init__(self, tensors: list[Tensor]) -> None:
        self._tensors = tensors

    def wait(self, timeout=None) -> bool:
        """Block until the collective has finished (inside compiled code: returns at once); returns True."""
        for t in self._tensors:
            if not isinstance(t._value, _Tracer):
                t._value.block_until_ready()
        return True

    def is_completed(self) -> bool:
        """Whether the result is computed (never blocks)."""
        return all(isinstance(t._value, _Tracer) or t._value.is_ready() for t in self._tensors)

    def is_success(self) -> bool:
        return self.is_completed()

    def result(self) -> list[Tensor]:
        """The output tensors."""
        return list(self._tensors)


@functools.cache
def _program(kind: str, op: ReduceOp | None, mesh, n: int, extra: int):
    """A jitted shard_map over ``mesh``: block (1, *shape) in, block (1, *out_shape) out."""
    return jax.jit(
        jax.shard_map(
            lambda x: block(kind, x[0], op, n, extra)[None], mesh=mesh, in_specs=_P, out_specs=_P, check_vma=False
        )
    )


def _value(t, what: str, name: str):
    if not isinstance(t, Tensor):
        raise TypeError(f"{what}: {name} must be a lazyflow Tensor, got {type(t).__name__}")
    v = t._value
    if state.tracing and not isinstance(v, _Tracer):
        raise GraphError(
            f"{what} inside compiled code on a tensor captured from outside it ({name} of shape {list(t.shape)}): "
            "compiled collectives work on the function's arguments, its modules' parameters and buffers, and "
            "tensors created inside it; pass the tensor as an argument"
        )
    return v


def _compute(kind: str, g: ProcessGroup, v, op=None, rank: int = 0, index: int = 0):
    """``kind`` over the group: signature exchange and an eager program, or, on a traced ``v``, the traced
    collective (``rank``: the src/dst global rank for the exchange, ``index``: its index in the group)."""
    if isinstance(v, _Tracer):
        return run_traced(kind, g, v, op, index)
    _check(kind, g, v, op, rank)
    return _run(kind, g, v, op, index)


def _run(kind: str, g: ProcessGroup, v, op=None, extra: int = 0):
    """This process's block of ``kind`` applied to every member's ``v``."""
    local = jax.device_put(v[None], g.device)
    arr = jax.make_array_from_single_device_arrays((g.size(), *v.shape), g.sharding, [local])
    out = _program(kind, op, g.mesh, g.size(), extra)(arr)
    return out.addressable_data(0)[0]


def _describe(row) -> str:
    if int(row[0]) == PROGRAM:
        return f"a compiled program with {int(row[1])} collectives"
    ndim = int(row[3])
    name = _DT.get(int(row[2]), "another dtype")
    return f"{_NAMES[int(row[0])]} of shape {tuple(int(d) for d in row[4 : 4 + ndim])} dtype {name}"


_NAMES = {i: k for k, i in _KINDS.items()}


def _dtype_code(dtype) -> int:
    """The same number in every process (a checksum of the name, not an order of first use)."""
    return zlib.crc32(str(dtype).encode()) % (2**31)


_DT = {
    _dtype_code(n): n
    for n in "bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 bfloat16 float32 float64 complex64 "
    "complex128".split()
}


def _check(kind: str, g: ProcessGroup, v, op=None, extra: int = 0) -> None:
    """Every member called ``kind`` with the same op/extra and a value of the same shape and dtype, else raise."""
    if g.size() == 1:
        return
    sig = np.zeros(_SIG, np.int32)
    sig[0], sig[1] = _KINDS[kind], -1 if op is None else _OPS[op]
    sig[2] = _dtype_code(v.dtype)
    sig[3] = v.ndim
    sig[4 : 4 + min(v.ndim, 10)] = v.shape[:10]
    sig[14], sig[15] = extra, int(np.prod(v.shape)) % (2**31)
    rows = exchange(g, sig)
    if (rows == rows[0]).all():
        return
    raise DistributedError(
        f"{kind}: the ranks of {g!r} called mismatched collectives ({describe_rows(g, rows)}); every rank must "
        "call the same collective with tensors of the same shape and dtype"
    )


def exchange(g: ProcessGroup, sig) -> np.ndarray:
    """Every member's signature row (int32[16]), by group rank: one small fixed-shape program, so it pairs up
    whatever collective or compiled program each rank is about to run."""
    return np.asarray(_run("signature", g, jnp.asarray(sig)))


def describe_rows(g: ProcessGroup, rows) -> str:
    """The members' signature rows in words, for an error message."""
    return "; ".join(
        f"rank {g.ranks[i]}: {_describe(r)}"
        + ("" if r[1] < 0 or int(r[0]) == PROGRAM else f" op {list(ReduceOp)[int(r[1])].name}")
        + (f" src/dst {int(r[14])}" if r[14] and int(r[0]) != PROGRAM else "")
        for i, r in enumerate(rows)
    )


def _finish(pairs, async_op: bool):
    for t, val in pairs:
        _rebind(t, val if isinstance(val, _Tracer) else jax.device_put(val, sharding_of(t._meta[2])))
    return Work([t for t, _ in pairs]) if async_op else None


def _op(op, what: str, v) -> ReduceOp:
    if not isinstance(op, ReduceOp):
        raise TypeError(f"{what}: op must be a lf.distributed.ReduceOp, got {op!r}")
    floating = jnp.issubdtype(v.dtype, jnp.inexact)
    if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and floating:
        raise TypeError(f"{what}: {op.name} needs an integer or bool tensor, got {v.dtype}")
    if op is ReduceOp.AVG and not floating:
        raise TypeError(f"{what}: ReduceOp.AVG needs a floating tensor, got {v.dtype}; use SUM and divide")
    return op


def _rank_arg(r: int, g: ProcessGroup, what: str, name: str) -> int:
    """A global rank -> its index in ``g``."""
    if r not in g.ranks:
        raise ValueError(f"{what}: {name}={r} is not a rank of {g!r}")
    return g.ranks.index(r)


def all_reduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM, group: ProcessGroup | None = None, async_op: bool = False):
    """Combine ``tensor`` over the ranks with ``op``; every rank's ``tensor`` gets the result, in place.

    Args:
        tensor: the same shape and dtype in every rank.
        op: SUM, AVG (floating only), PRODUCT, MIN, MAX, or BAND/BOR/BXOR (integer and bool only).
        group: a group from :func:`new_group` (default: every rank).
        async_op: return a :class:`Work` handle instead of None.
    Raises:
        DistributedNotInitializedError: before ``init_process_group``. DistributedError: the ranks' tensors
        differ in shape/dtype, or this rank is not in ``group``. TypeError: an op the dtype does not support.

    >>> t = lf.tensor([float(rank)]); lf.distributed.all_reduce(t)  # t == sum of the ranks everywhere
    """
    g = group_of(group, "all_reduce")
    v = _value(tensor, "all_reduce", "tensor")
    op = _op(op, "all_reduce", v)
    return _finish([(tensor, _compute("all_reduce", g, v, op))], async_op)


def reduce(tensor: Tensor, dst: int, op: ReduceOp = ReduceOp.SUM, group=None, async_op: bool = False):
    """Like :func:`all_reduce`, but only rank ``dst``'s ``tensor`` receives the result (the others keep theirs)."""
    g = group_of(group, "reduce")
    v = _value(tensor, "reduce", "tensor")
    op = _op(op, "reduce", v)
    d = _rank_arg(dst, g, "reduce", "dst")
    return _finish([(tensor, _compute("reduce", g, v, op, dst, d))], async_op)


def broadcast(tensor: Tensor, src: int, group: ProcessGroup | None = None, async_op: bool = False):
    """Copy rank ``src``'s ``tensor`` into every rank's ``tensor`` (same shape and dtype everywhere), in place."""
    g = group_of(group, "broadcast")
    v = _value(tensor, "broadcast", "tensor")
    s = _rank_arg(src, g, "broadcast", "src")
    return _finish([(tensor, _compute("broadcast", g, v, None, src, s))], async_op)


def all_gather(tensor_list: list[Tensor], tensor: Tensor, group=None, async_op: bool = False):
    """Fill ``tensor_list`` (one tensor per rank of the group) with every rank's ``tensor``, in place."""
    g = group_of(group, "all_gather")
    v = _value(tensor, "all_gather", "tensor")
    if not isinstance(tensor_list, list) or len(tensor_list) != g.size():
        raise ValueError(f"all_gather: tensor_list must be a list of {g.size()} tensors (one per rank)")
    for t in tensor_list:
        _value(t, "all_gather", "tensor_list item")
        if tuple(t.shape) != v.shape:
            raise ValueError(f"all_gather: tensor_list holds a tensor of shape {tuple(t.shape)}, expected {v.shape}")
    out = _compute("all_gather", g, v)
    return _finish([(t, out[i].astype(t._value.dtype)) for i, t in enumerate(tensor_list)], async_op)


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor, group=None, async_op: bool = False):
    """Every rank's ``input_tensor`` concatenated along dim 0 (shape ``(n * d0, ...)``) or stacked (shape
    ``(n, d0, ...)``), written into ``output_tensor``."""
    g = group_of(group, "all_gather_into_tensor")
    v = _value(input_tensor, "all_gather_into_tensor", "input_tensor")
    o = _value(output_tensor, "all_gather_into_tensor", "output_tensor")
    n = g.size()
    cat = (n * v.shape[0], *v.shape[1:]) if v.ndim else (n,)
    if o.shape not in (cat, (n, *v.shape)) or o.dtype != v.dtype:
        raise ValueError(
            f"all_gather_into_tensor: output_tensor must have shape {cat} or {(n, *v.shape)} and dtype {v.dtype}, "
            f"got {o.shape} {o.dtype}"
        )
    if isinstance(v, _Tracer):
        out = run_traced("all_gather", g, v)
    else:
        _check("all_gather_into_tensor", g, v)
        out = _run("all_gather", g, v)
    return _finish([(output_tensor, out.reshape(o.shape))], async_op)


def reduce_scatter_tensor(
    output: Tensor, input: Tensor, op: ReduceOp = ReduceOp.SUM, group=None, async_op: bool = False
):
    """Reduce ``input`` (shape ``(n * k, ...)``) over the ranks and give rank i the i-th block of ``k`` rows."""
    g = group_of(group, "reduce_scatter_tensor")
    v = _value(input, "reduce_scatter_tensor", "input")
    o = _value(output, "reduce_scatter_tensor", "output")
    op = _op(op, "reduce_scatter_tensor", v)
    n = g.size()
    if v.ndim == 0 or v.shape[0] != n * o.shape[0] or o.shape[1:] != v.shape[1:] or o.dtype != v.dtype:
        raise ValueError(
            f"reduce_scatter_tensor: input must have shape (world_size * k, ...) = ({n} * {o.shape[:1]}, "
            f"{o.shape[1:]}) for output {o.shape} {o.dtype}, got {v.shape} {v.dtype}"
        )
    return _finish([(output, _compute("reduce_scatter_tensor", g, v, op))], async_op)


def all_to_all_single(
    output: Tensor,
    input: Tensor,
    output_split_sizes: list[int] | None = None,
    input_split_sizes: list[int] | None = None,
    group=None,
    async_op: bool = False,
):
    """Rank i's j-th block of ``input`` (dim 0 split into blocks) becomes rank j's i-th block of ``output``.

    Without split sizes dim 0 splits into n equal blocks. With them, ``input_split_sizes[j]`` rows go to rank j
    and ``output_split_sizes[j]`` rows come from rank j (a missing list means equal blocks); pass them on every
    rank or on none. Unequal blocks are padded to a common size (rounded up to a power of two, which bounds the
    number of compiled programs) after a small exchange of every rank's sizes.

    Raises:
        ValueError: shapes or split sizes that do not fit this rank's tensors. DistributedError: ranks whose
        sizes disagree (rank i's ``output_split_sizes[j]`` is not rank j's ``input_split_sizes[i]``).
    """
    g = group_of(group, "all_to_all_single")
    v = _value(input, "all_to_all_single", "input")
    o = _value(output, "all_to_all_single", "output")
    n = g.size()
    if v.ndim == 0 or o.shape[1:] != v.shape[1:] or o.dtype != v.dtype:
        raise ValueError(
            f"all_to_all_single: output must have input's trailing shape and dtype; got input {v.shape} {v.dtype}, "
            f"output {o.shape} {o.dtype}"
        )
    if output_split_sizes is None and input_split_sizes is None:
        if v.shape[0] % n or o.shape != v.shape:
            raise ValueError(
                f"all_to_all_single: input's dim 0 must divide into {n} blocks and output must match input's shape "
                f"and dtype; got input {v.shape} {v.dtype}, output {o.shape} {o.dtype}"
            )
        return _finish([(output, _compute("all_to_all_single", g, v))], async_op)
    if isinstance(v, _Tracer):
        raise NotSupportedError(
            "all_to_all_single with split sizes inside lf.compile / nn.Graph: compiled code supports equal blocks "
            "only (no split sizes); pad the blocks to one size, or call it eagerly"
        )
    s_in = _splits(input_split_sizes, v.shape[0], n, "input")
    s_out = _splits(output_split_sizes, o.shape[0], n, "output")
    _check("all_to_all_single", g, np.empty((0, *v.shape[1:]), v.dtype), None, 1)
    table = np.asarray(_run("all_gather", g, jnp.asarray(s_in + s_out, jnp.int32)))  # row j: rank j's sizes
    sent, expected = table[:, :n], table[:, n:]
    bad = [(i, j) for i in range(n) for j in range(n) if expected[i, j] != sent[j, i]]
    if bad:
        i, j = bad[0]
        raise DistributedError(
            f"all_to_all_single: rank {g.ranks[i]} expects {expected[i, j]} rows from rank {g.ranks[j]}, which "
            f"sends it {sent[j, i]} (input_split_sizes by rank: {sent.tolist()}; output_split_sizes by rank: "
            f"{expected.tolist()}); every rank's output_split_sizes[j] must be rank j's input_split_sizes[i]"
        )
    m = int(sent.max())
    if m == 0:
        return _finish([(output, o)], async_op)
    m = 1 << (m - 1).bit_length()
    offsets = np.concatenate([[0], np.cumsum(s_in)])
    pad = [(0, 0)] * (v.ndim - 1)
    padded = jnp.concatenate([jnp.pad(v[offsets[j] : offsets[j + 1]], [(0, m - s_in[j]), *pad]) for j in range(n)])
    got = _run("all_to_all_single", g, padded)
    out = jnp.concatenate([got[j * m : j * m + s_out[j]] for j in range(n)])
    return _finish([(output, out)], async_op)


def _splits(sizes, rows: int, n: int, what: str) -> list[int]:
    if sizes is None:
        if rows % n:
            raise ValueError(f"all_to_all_single: {what}'s dim 0 ({rows}) does not split into {n} equal blocks")
        return [rows // n] * n
    sizes = [int(s) for s in sizes]
    if len(sizes) != n or any(s < 0 for s in sizes) or sum(sizes) != rows:
        raise ValueError(
            f"all_to_all_single: {what}_split_sizes must be {n} non-negative sizes adding up to {what}'s dim 0 "
            f"({rows}), got {sizes}"
        )
    return sizes


def scatter(tensor: Tensor, scatter_list: list[Tensor] | None = None, src: int = 0, group=None, async_op=False):
    """Rank ``src``'s ``scatter_list[i]`` goes into the ``tensor`` of the group's rank i."""
    g = group_of(group, "scatter")
    v = _value(tensor, "scatter", "tensor")
    s = _rank_arg(src, g, "scatter", "src")
    if jax.process_index() == src:
        if scatter_list is None or len(scatter_list) != g.size():
            raise ValueError(f"scatter: rank {src} (src) must pass a scatter_list of {g.size()} tensors")
        parts = [_value(t, "scatter", "scatter_list item") for t in scatter_list]
        if any(p.shape != v.shape or p.dtype != v.dtype for p in parts):
            raise ValueError(f"scatter: every scatter_list item must have tensor's shape {v.shape} and dtype")
        stacked = jnp.stack([p if isinstance(v, _Tracer) else jax.device_put(p, g.device) for p in parts])
    else:
        stacked = jnp.zeros((g.size(), *v.shape), v.dtype, device=None if isinstance(v, _Tracer) else g.device)
    if isinstance(v, _Tracer):
        return _finish([(tensor, run_traced("scatter", g, jnp.asarray(stacked), None, s))], async_op)
    _check("scatter", g, v, None, src)
    return _finish([(tensor, _run("scatter", g, stacked, None, s))], async_op)


def gather(tensor: Tensor, gather_list: list[Tensor] | None = None, dst: int = 0, group=None, async_op=False):
    """Every rank's ``tensor`` goes into ``gather_list`` (a list of n tensors) on rank ``dst`` only."""
    g = group_of(group, "gather")
    v = _value(tensor, "gather", "tensor")
    _rank_arg(dst, g, "gather", "dst")
    if jax.process_index() == dst and (gather_list is None or len(gather_list) != g.size()):
        raise ValueError(f"gather: rank {dst} (dst) must pass a gather_list of {g.size()} tensors")
    out = _compute("gather", g, v, None, dst)
    pairs = [] if jax.process_index() != dst or gather_list is None else list(zip(gather_list, out))
    return _finish(pairs, async_op)


def barrier(group: ProcessGroup | None = None, async_op: bool = False, device_ids=None, timeout=None):
    """Block until every rank of ``group`` reaches this point (torch's signature).

    It is a collective like the others (a small exchange between the ranks): a rank that meets a different
    collective instead raises :class:`DistributedError` naming every rank's call, rather than waiting. Inside
    compiled code it is a no-op (the program's own collectives order the ranks).

    Args:
        group: a group from :func:`new_group` (default: every rank).
        async_op: return a :class:`Work` handle (already completed) instead of None.
        device_ids, timeout: accepted for torch compatibility and ignored.
    Raises:
        DistributedNotInitializedError: a group is given before ``init_process_group``.
        DistributedError: another rank called a different collective.
    """
    if group is not None or jax.process_count() > 1:
        g = group_of(group, "barrier")
        if not state.tracing:
            _check("barrier", g, np.zeros((), np.int32))
    return Work([]) if async_op else None
