"""A compiled program that calls collectives, run as a ``shard_map`` over every process.

``lf.compile`` / ``lf.nn.Graph`` wrap a program whose trace met a collective (:mod:`.traced`) in
:class:`SpmdProgram`: every process passes its own values (parameters, batch slice, optimizer state); each becomes
its block of a global array over the default group's mesh (one device per process, axis ``"rank"``; the block is
the value itself, so nothing is copied), the program runs once as a ``shard_map`` in which the collectives are
XLA's, and each process gets its own block of every output back. Before every call the ranks exchange the
program's collective signature (one small fixed-shape program, the same one eager collectives use): ranks about to
run programs whose collectives differ -- another shape, another op, another order, or an eager collective on one
side -- raise :class:`DistributedError` naming each rank's collectives, instead of hanging in mismatched XLA
collectives.
"""

from __future__ import annotations

import zlib

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec, SingleDeviceSharding

from .._core.errors import DistributedError
from .collectives import _SIG, PROGRAM, describe_rows, exchange
from .groups import AXIS, ProcessGroup
from .process_group import all_gather_object
from .traced import SpmdTrace, enter, zero_from

__all__ = ["SpmdProgram", "check_program"]

_P = PartitionSpec(AXIS)
_PY_SCALARS = (bool, int, float, complex)


class SpmdProgram:
    """``fn`` (a function of array pytrees) jitted as a shard_map over ``group``'s mesh; called like ``fn`` with
    this process's values, returning this process's results."""

    def __init__(self, fn, group: ProcessGroup, where: str) -> None:
        self._fn, self._group, self._where = fn, group, where
        self._local = SingleDeviceSharding(group.device)
        self._jits: dict = {}
        self.log: list[str] | None = None  # the collectives of the last trace, in order

    def _program(self, tree, scalars):
        """``scalars[i]``: 1 for a 0-d array (passed as a (1,) block), 2 for a Python scalar (passed as itself,
        replicated: each process's own value reaches its own device, weakly typed as jit would have it)."""
        key = (tree, scalars)
        hit = self._jits.get(key)
        if hit is not None:
            return hit
        info: dict = {}
        n = self._group.size()

        def body(*blocks):
            vals = [b.reshape(()) if s == 1 else b for b, s in zip(blocks, scalars)]
            trace = SpmdTrace(n)
            prev = enter(trace)
            try:
                out = self._fn(*jax.tree_util.tree_unflatten(tree, vals))
            finally:
                enter(prev)
            leaves, info["tree"] = jax.tree_util.tree_flatten(out)
            info["scalars"] = [jnp.ndim(o) == 0 for o in leaves]
            info["log"] = trace.log
            # the last collective's result feeds one extra output: XLA keeps every collective of the chain (it would
            # drop one whose result this rank does not use, e.g. gather's on a rank other than dst, and hang the others)
            tail = [] if trace.last is None else [jnp.reshape(zero_from(trace.last), (1,))]
            return [jnp.reshape(o, (1,)) if jnp.ndim(o) == 0 else o for o in leaves] + tail

        specs = tuple(PartitionSpec() if s == 2 else _P for s in scalars)
        mapped = jax.shard_map(body, mesh=self._group.mesh, in_specs=specs, out_specs=_P, check_vma=False)
        jitted = jax.jit(mapped)
        self._jits[key] = hit = (jitted, info)
        return hit

    def _globals(self, args):
        leaves, tree = jax.tree_util.tree_flatten(args)
        scalars = tuple(2 if type(x) in _PY_SCALARS else int(np.ndim(x) == 0) for x in leaves)
        n, sharding = self._group.size(), self._group.sharding
        out = []
        for x, s in zip(leaves, scalars):
            if s == 2:
                out.append(x)
                continue
            if s:  # a 0-d value (the RNG seed/offset, a step count): reshaped on the host, one transfer
                a = jax.device_put(np.asarray(x).reshape(1), self._local)
            else:
                a = x if isinstance(x, jax.Array) else jnp.asarray(x)
                if a.sharding != self._local:
                    a = jax.device_put(a, self._local)
            out.append(jax.make_array_from_single_device_arrays((n * a.shape[0], *a.shape[1:]), sharding, [a]))
        return tree, scalars, out

    def trace(self, *args):
        """The traced (not yet lowered) global program, as ``jax.jit(...).trace`` gives it."""
        tree, scalars, glob = self._globals(args)
        return self._program(tree, scalars)[0].trace(*glob)

    def __call__(self, *args):
        """Check the ranks' collective signatures, then run; this process's outputs."""
        tree, scalars, glob = self._globals(args)
        jitted, info = self._program(tree, scalars)
        if "log" not in info:
            jitted.trace(*glob)  # fills info; the call below reuses this trace
        self.log = info["log"]
        check_program(self._group, info["log"], self._where)
        outs = jitted(*glob)[: len(info["scalars"])]
        local = [o.addressable_data(0) for o in outs]
        local = [o.reshape(()) if s else o for o, s in zip(local, info["scalars"])]
        return jax.tree_util.tree_unflatten(info["tree"], local)


def _signature(log: list[str]) -> np.ndarray:
    text = "\n".join(log).encode()
    sig = np.zeros(_SIG, np.int32)
    sig[0], sig[1] = PROGRAM, len(log)
    sig[2], sig[3] = zlib.crc32(text) % (2**31), zlib.adler32(text) % (2**31)
    return sig


def check_program(group: ProcessGroup, log: list[str], where: str) -> None:
    """Every rank of ``group`` is about to run a compiled program with the same collectives as ``log``, else raise
    :class:`DistributedError` on every rank (the ranks see the same rows, so they raise together).

    Raises:
        DistributedError: the collectives differ; with compiled programs on every rank the message lists each
            rank's collectives where they first differ.
    """
    if group.size() == 1:
        return
    rows = exchange(group, _signature(log))
    if (rows == rows[0]).all():
        return
    if (rows[:, 0] == PROGRAM).all():  # every rank is here: compare the full lists (small, through the KV store)
        logs: list = [None] * group.size()
        all_gather_object(logs, log)
        first = next(i for i in range(max(map(len, logs)) + 1) if len({tuple(lg[i : i + 1]) for lg in logs}) > 1)
        detail = "; ".join(
            f"rank {r}: collective #{first + 1} is {lg[first] if first < len(lg) else 'missing'} ({len(lg)} in all)"
            for r, lg in zip(group.ranks, logs)
        )
    else:
        detail = describe_rows(group, rows)
    raise DistributedError(
        f"{where}: the ranks are about to run compiled collectives that do not match ({detail}); every rank must "
        "run the same collectives, with tensors of the same shape and dtype, in the same order"
    )
