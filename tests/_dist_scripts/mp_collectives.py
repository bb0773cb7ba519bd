"""One rank of the eager-collective and DDP tests (started by lazyflow.distributed.run with 1, 2 or 4 processes,
one CPU device each). Checks print OK/FAIL lines (see _checks.py).

Every rank can compute every rank's input (seeded by the rank), so each result is compared with numpy applied to
the stacked per-rank values. DDP training is compared with plain JAX (jax.grad + torch's SGD-momentum rule) on
the concatenated global batch. ``argv[1]`` is a directory holding torch_ddp.npz (a torch DDP state dict written
by the test) and receiving lf_ddp_rank<k>.npz.

``mp_collectives.py die``: rank 1 raises while rank 0 waits in an all_reduce (the launcher must end both).
"""

from __future__ import annotations

import os
import sys

import lazyflow as lf

lf.distributed.init_process_group()

import jax
import jax.numpy as jnp
import numpy as np
from _checks import check, main

from lazyflow import nn
from lazyflow._core.errors import NotSupportedError
from lazyflow.nn.modules.utils import consume_prefix_in_state_dict_if_present

D = lf.distributed
R, N = D.get_rank(), D.get_world_size()
OPS = D.ReduceOp


def per_rank(shape, dtype=np.float32, seed=0):
    """Every rank's input, stacked: row r is rank r's value."""
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-20, 20, (N, *shape)).astype(dtype)
    return rng.standard_normal((N, *shape)).astype(dtype)


def raises(exc, fn, *words):
    try:
        fn()
    except exc as e:
        for w in words:
            assert w in str(e), (w, str(e))
        return
    raise AssertionError(f"{fn} did not raise {exc.__name__}")


if sys.argv[1:] == ["die"]:
    if R == 1:
        raise RuntimeError("rank 1 died before the all_reduce")
    D.all_reduce(lf.ones(3))
    print(f"rank 0 finished an all_reduce without rank 1 {lf.ones(1).item()}", flush=True)
    sys.exit(0)
OUT_DIR = sys.argv[1]


# ------------------------------------------------------------------------------------------ collectives
@check
def all_reduce_every_op_in_place():
    refs = {
        OPS.SUM: lambda a: a.sum(0),
        OPS.AVG: lambda a: a.mean(0),
        OPS.PRODUCT: lambda a: a.prod(0),
        OPS.MIN: lambda a: a.min(0),
        OPS.MAX: lambda a: a.max(0),
        OPS.BAND: lambda a: np.bitwise_and.reduce(a, 0),
        OPS.BOR: lambda a: np.bitwise_or.reduce(a, 0),
        OPS.BXOR: lambda a: np.bitwise_xor.reduce(a, 0),
    }
    for i, (op, ref) in enumerate(refs.items()):
        dtypes = [np.int32] if op in (OPS.BAND, OPS.BOR, OPS.BXOR) else [np.float32, np.int32]
        if op is OPS.AVG:
            dtypes = [np.float32]
        for dt in dtypes:
            a = per_rank((3, 5), dt, seed=100 + i)
            t = lf.tensor(a[R])
            version = t._version
            assert D.all_reduce(t, op) is None
            assert t._version == version + 1  # the same object, rebound
            got = t.numpy()
            assert got.dtype == dt, (op, got.dtype)
            np.testing.assert_allclose(got, ref(a), rtol=1e-5, atol=1e-5, err_msg=f"{op} {dt}")
    b = per_rank((4,), np.int32, seed=3) > 0
    t = lf.tensor(b[R])
    D.all_reduce(t, OPS.MAX)
    assert t.numpy().tolist() == b.any(0).tolist()


@check
def broadcast_reduce_from_every_rank():
    a = per_rank((2, 3), seed=5)
    for src in range(N):
        t = lf.tensor(a[R])
        D.broadcast(t, src)
        np.testing.assert_array_equal(t.numpy(), a[src])
        t = lf.tensor(a[R])
        D.reduce(t, dst=src, op=OPS.MAX)
        np.testing.assert_allclose(t.numpy(), a.max(0) if R == src else a[R])
    n = per_rank((3,), seed=6)
    n[0, 1] = np.nan  # rank 0's NaN must not reach the others' broadcast from another rank
    t = lf.tensor(n[R])
    D.broadcast(t, N - 1)
    np.testing.assert_array_equal(t.numpy(), n[N - 1])


@check
def all_gather_variants():
    a = per_rank((2, 3), seed=7)
    outs = [lf.zeros(2, 3) for _ in range(N)]
    ids = [id(o) for o in outs]
    D.all_gather(outs, lf.tensor(a[R]))
    assert [id(o) for o in outs] == ids
    for r in range(N):
        np.testing.assert_array_equal(outs[r].numpy(), a[r])
    cat = lf.zeros(2 * N, 3)
    D.all_gather_into_tensor(cat, lf.tensor(a[R]))
    np.testing.assert_array_equal(cat.numpy(), a.reshape(2 * N, 3))
    stacked = lf.zeros(N, 2, 3)
    D.all_gather_into_tensor(stacked, lf.tensor(a[R]))
    np.testing.assert_array_equal(stacked.numpy(), a)


@check
def reduce_scatter_and_all_to_all():
    a = per_rank((2 * N, 3), seed=8)
    for op, ref in ((OPS.SUM, a.sum(0)), (OPS.AVG, a.mean(0)), (OPS.MAX, a.max(0))):
        out = lf.zeros(2, 3)
        D.reduce_scatter_tensor(out, lf.tensor(a[R]), op)
        np.testing.assert_allclose(out.numpy(), ref[2 * R : 2 * R + 2], rtol=1e-5, atol=1e-6, err_msg=str(op))
    out = lf.zeros(2 * N, 3)
    D.all_to_all_single(out, lf.tensor(a[R]))
    want = np.concatenate([a[s, 2 * R : 2 * R + 2] for s in range(N)])
    np.testing.assert_array_equal(out.numpy(), want)
    out = lf.zeros(2 * N, 3)
    D.all_to_all_single(out, lf.tensor(a[R]), [2] * N, [2] * N)
    np.testing.assert_array_equal(out.numpy(), want)


def rows_to(src, dst):
    """How many rows rank src sends rank dst in the uneven all_to_all (0 included)."""
    return (2 * src + dst) % 3


@check
def all_to_all_uneven_splits():
    s_in = [rows_to(R, j) for j in range(N)]
    s_out = [rows_to(j, R) for j in range(N)]
    inputs = [
        np.arange(sum(rows_to(r, j) for j in range(N)) * 2, dtype=np.float32).reshape(-1, 2) + 100 * r for r in range(N)
    ]
    want = np.concatenate(
        [inputs[j][sum(rows_to(j, k) for k in range(R)) :][: rows_to(j, R)] for j in range(N)]
    ).reshape(-1, 2)
    out = lf.zeros(sum(s_out), 2)
    D.all_to_all_single(out, lf.tensor(inputs[R]), s_out, s_in)
    np.testing.assert_array_equal(out.numpy(), want)
    if N > 1:  # rank 0 expects one row too many from rank 1: every rank raises, naming both
        wrong = [s + (1 if R == 0 and j == 1 else 0) for j, s in enumerate(s_out)]
        raises(
            D.DistributedError,
            lambda: D.all_to_all_single(lf.zeros(sum(wrong), 2), lf.tensor(inputs[R]), wrong, s_in),
            f"rank 0 expects {rows_to(1, 0) + 1} rows from rank 1, which sends it {rows_to(1, 0)}",
        )


@check
def scatter_gather():
    a = per_rank((N, 4), seed=9)  # row src: the list rank src scatters
    for root in range(N):
        t = lf.zeros(4)
        D.scatter(t, [lf.tensor(x) for x in a[root]] if R == root else None, src=root)
        np.testing.assert_array_equal(t.numpy(), a[root, R])
        got = [lf.zeros(4) for _ in range(N)] if R == root else None
        D.gather(lf.tensor(a[0, R]), got, dst=root)
        if R == root:
            assert got is not None
            np.testing.assert_array_equal(np.stack([g.numpy() for g in got]), a[0])


@check
def async_work_handles():
    a = per_rank((64, 64), seed=10)
    t = lf.tensor(a[R])
    w = D.all_reduce(t, async_op=True)
    assert isinstance(w, D.Work)
    assert w.wait() is True and w.is_completed() and w.result() == [t]
    np.testing.assert_allclose(t.numpy(), a.sum(0), rtol=1e-5, atol=1e-4)
    outs = [lf.zeros(64, 64) for _ in range(N)]
    w = D.all_gather(outs, lf.tensor(a[R]), async_op=True)
    w.wait()
    np.testing.assert_array_equal(outs[-1].numpy(), a[-1])


@check
def groups():
    ranks = list(range(N))[::-1][: max(1, N // 2)]  # the upper half, in reverse order
    g = D.new_group(ranks)  # torch numbers the members in ascending order unless sort_ranks=False
    assert D.get_world_size(g) == len(ranks) and g.ranks == sorted(ranks)
    assert D.get_rank(g) == (sorted(ranks).index(R) if R in ranks else -1)
    assert D.get_rank(D.new_group(ranks, sort_ranks=False)) == (ranks.index(R) if R in ranks else -1)
    a = per_rank((3,), seed=11)
    t = lf.tensor(a[R])
    if R in ranks:
        D.all_reduce(t, group=g)
        np.testing.assert_allclose(t.numpy(), a[ranks].sum(0), rtol=1e-5)
        t = lf.tensor(a[R])
        D.broadcast(t, ranks[-1], group=g)  # src is a global rank, as in torch
        np.testing.assert_array_equal(t.numpy(), a[ranks[-1]])
        outs = [lf.zeros(3) for _ in ranks]
        D.all_gather(outs, lf.tensor(a[R]), group=g)  # in group-rank order
        np.testing.assert_array_equal(np.stack([o.numpy() for o in outs]), a[sorted(ranks)])
    else:
        raises(D.DistributedError, lambda: D.all_reduce(t, group=g), f"rank {R} is not a member")
    whole = D.new_group()
    t = lf.tensor(a[R])
    D.all_reduce(t, group=whole)
    np.testing.assert_allclose(t.numpy(), a.sum(0), rtol=1e-5)
    raises(ValueError, lambda: D.new_group([0, 0]), "distinct")
    raises(ValueError, lambda: D.new_group([N]), "distinct ranks in")


@check
def mismatched_calls_name_the_ranks():
    if N == 1:
        return
    # rank 1 passes a different shape: every rank raises, naming both shapes (no hang)
    shape = (2, 3) if R != 1 else (3, 3)
    raises(
        D.DistributedError,
        lambda: D.all_reduce(lf.zeros(*shape)),
        "rank 0: all_reduce of shape (2, 3)",
        "rank 1: all_reduce of shape (3, 3)",
        "mismatched",
    )
    dtype = lf.float32 if R != 1 else lf.int32
    raises(D.DistributedError, lambda: D.all_reduce(lf.zeros(4, dtype=dtype)), "int32", "float32")
    op = OPS.SUM if R != 1 else OPS.MAX
    raises(D.DistributedError, lambda: D.all_reduce(lf.zeros(4), op), "op SUM", "op MAX")
    raises(D.DistributedError, lambda: D.broadcast(lf.zeros(2), 0 if R != 1 else 1), "src/dst 1")
    t = lf.tensor([float(R)])  # the group still works afterwards
    D.all_reduce(t)
    assert t.item() == N * (N - 1) / 2


@check
def bad_arguments():
    raises(TypeError, lambda: D.all_reduce(lf.zeros(2), "sum"), "ReduceOp")
    raises(TypeError, lambda: D.all_reduce(lf.zeros(2, dtype=lf.int32), OPS.AVG), "floating")
    raises(TypeError, lambda: D.all_reduce(lf.zeros(2), OPS.BAND), "integer or bool")
    raises(TypeError, lambda: D.all_reduce(np.zeros(2)), "lazyflow Tensor")
    raises(ValueError, lambda: D.broadcast(lf.zeros(2), N), f"src={N} is not a rank")
    raises(ValueError, lambda: D.all_gather([lf.zeros(2)] * (N + 1), lf.zeros(2)), f"list of {N} tensors")
    raises(ValueError, lambda: D.all_gather_into_tensor(lf.zeros(N + 1, 2), lf.zeros(2)), "output_tensor")
    raises(ValueError, lambda: D.reduce_scatter_tensor(lf.zeros(2), lf.zeros(2 * N + 1)), "input must have")
    raises(ValueError, lambda: D.all_to_all_single(lf.zeros(N), lf.zeros(2 * N)), "output must match")
    raises(ValueError, lambda: D.all_to_all_single(lf.zeros(N, 3), lf.zeros(N, 4), [1] * N, [1] * N), "trailing shape")
    if N > 1:  # 2N + 1 output rows do not split into N equal blocks
        raises(ValueError, lambda: D.all_to_all_single(lf.zeros(2 * N + 1), lf.zeros(N), None, [1] * N), "equal blocks")
    raises(ValueError, lambda: D.all_to_all_single(lf.zeros(N), lf.zeros(N), [1] * N, [2] * N), "adding up to")
    raises(TypeError, lambda: D.all_reduce(lf.zeros(2), group="world"), "ProcessGroup")
    assert D.is_available() and D.is_initialized()


# ------------------------------------------------------------------------------------------ DDP
B, STEPS, LR, MOM = 8, 3, 0.1, 0.9
DATA = [(per_rank((B // 1, 5), seed=20 + s)[0], per_rank((B, 2), seed=40 + s)[0]) for s in range(STEPS)]


def mlp(seed):
    lf.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 2))


def my_slice(a):
    k = len(a) // N
    return lf.tensor(a[R * k : (R + 1) * k])


def reference(steps, micro=1):
    """Plain JAX from rank 0's initial weights: SGD with momentum (torch's rule) on the whole global batches;
    with ``micro`` > 1 each step sums the gradients of ``micro`` consecutive batches (gradient accumulation)."""
    p = {k: jnp.asarray(v.numpy()) for k, v in mlp(0).state_dict().items()}

    def loss_fn(p, x, y):
        z = jnp.tanh(x @ p["0.weight"].T + p["0.bias"]) @ p["2.weight"].T + p["2.bias"]
        return jnp.mean((z - y) ** 2)

    buf = None
    for s in range(steps):
        gs = [jax.grad(loss_fn)(p, *map(jnp.asarray, DATA[s * micro + i])) for i in range(micro)]
        g = jax.tree.map(lambda *a: sum(a), *gs)
        buf = g if buf is None else jax.tree.map(lambda b, gi: MOM * b + gi, buf, g)
        p = jax.tree.map(lambda w, b: w - LR * b, p, buf)
    return {k: np.asarray(v) for k, v in p.items()}


def state(m):
    return {k: v.numpy() for k, v in m.state_dict().items()}


@check
def ddp_broadcasts_rank0_and_matches_one_process_training():
    m = mlp(R)  # every rank starts from different weights: DDP copies rank 0's
    ddp = nn.parallel.DistributedDataParallel(m)
    assert ddp.module is m
    for k, v in state(m).items():
        np.testing.assert_array_equal(v, state(mlp(0))[k], err_msg=k)
    opt = lf.optim.SGD(ddp.parameters(), lr=LR, momentum=MOM)
    for x, y in DATA:
        opt.zero_grad()
        ((ddp(my_slice(x)) - my_slice(y)) ** 2).mean().backward()
        opt.step()
    ref = reference(STEPS)
    for k, v in state(m).items():
        np.testing.assert_allclose(v, ref[k], rtol=1e-5, atol=1e-6, err_msg=k)


@check
def ddp_init_sync_false_keeps_each_ranks_weights():
    m = mlp(R)
    nn.parallel.DistributedDataParallel(m, None, None, 0, True, False)  # torch's positional order
    for k, v in state(m).items():
        np.testing.assert_array_equal(v, state(mlp(R))[k], err_msg=k)


@check
def ddp_no_sync_accumulates_then_averages():
    m = mlp(0)
    ddp = nn.parallel.DistributedDataParallel(m)
    opt = lf.optim.SGD(ddp.parameters(), lr=LR, momentum=MOM)
    opt.zero_grad()
    with ddp.no_sync():
        x, y = DATA[0]
        ((ddp(my_slice(x)) - my_slice(y)) ** 2).mean().backward()
    if N > 1:  # local gradients only: they differ between ranks
        slots = [None] * N
        D.all_gather_object(slots, m[0].weight.grad.numpy())
        assert not np.allclose(slots[0], slots[1])
    x, y = DATA[1]
    ((ddp(my_slice(x)) - my_slice(y)) ** 2).mean().backward()
    opt.step()
    ref = reference(1, micro=2)
    for k, v in state(m).items():
        np.testing.assert_allclose(v, ref[k], rtol=1e-5, atol=1e-6, err_msg=k)


@check
def ddp_state_dict_prefix_and_torch_checkpoints():
    m = mlp(3)
    ddp = nn.parallel.DistributedDataParallel(m)
    sd = ddp.state_dict()
    assert list(sd) == [f"module.{k}" for k in m.state_dict()]
    theirs = dict(np.load(os.path.join(OUT_DIR, "torch_ddp.npz")))  # keys module.x, from torch's DDP
    ddp.load_state_dict({k: lf.tensor(v) for k, v in theirs.items()})
    for k, v in theirs.items():
        np.testing.assert_array_equal(ddp.state_dict()[k].numpy(), v)
    plain = mlp(4)
    sd = {k: lf.tensor(v) for k, v in theirs.items()}
    consume_prefix_in_state_dict_if_present(sd, "module.")
    plain.load_state_dict(sd)
    np.testing.assert_array_equal(plain[0].weight.detach().numpy(), theirs["module.0.weight"])
    np.savez(os.path.join(OUT_DIR, f"lf_ddp_rank{R}.npz"), **state(ddp))


@check
def ddp_discarded_stops_averaging():
    import gc

    from lazyflow.autograd import engine

    m = mlp(0)
    ddp = nn.parallel.DistributedDataParallel(m)
    del ddp
    gc.collect()
    assert not any(id(p) in engine._post_accumulate for p in m.parameters())
    x, y = DATA[0]
    ((m(my_slice(x)) - my_slice(y)) ** 2).mean().backward()  # a plain backward again: local gradients
    if N > 1:
        slots = [None] * N
        D.all_gather_object(slots, m[0].weight.grad.numpy())
        assert not np.allclose(slots[0], slots[1])


@check
def ddp_bad_input_and_graph_use():
    raises(TypeError, lambda: nn.parallel.DistributedDataParallel(lambda x: x), "lf.nn.Module")
    m = lf.compile(lambda: nn.parallel.DistributedDataParallel(mlp(0)))
    raises(NotSupportedError, m, "construct the wrapper eagerly")


import mp_compiled  # noqa: F401  (its checks join this launch)

if __name__ == "__main__":
    main()
    D.barrier()
