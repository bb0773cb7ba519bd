"""Collectives inside lf.compile / lf.nn.Graph, run in the same launch as mp_collectives.py (which imports this
module at its end, so its checks join the same OK/FAIL list: one launch per world size).

The helpers (per-rank inputs, the DDP data, the plain-JAX reference) are mp_collectives.py's, read from
``__main__``. Each compiled collective is compared with numpy on the stacked per-rank values and with the same
function run eagerly; a DDP step inside an nn.Graph with plain JAX on the concatenated batch and with eager DDP.
"""

from __future__ import annotations

import jax
import numpy as np
from _checks import check

import lazyflow as lf
from __main__ import DATA, LR, MOM, OPS, STEPS, D, N, R, mlp, my_slice, per_rank, raises, reference, state
from lazyflow import nn
from lazyflow._core.errors import GraphError, IndexOutOfRangeError, NotSupportedError


def every_collective(x, xi):
    """Every collective once, on clones (the same function runs eagerly and compiled)."""
    out = {}
    for name, op in (("sum", OPS.SUM), ("avg", OPS.AVG), ("max", OPS.MAX), ("min", OPS.MIN), ("prod", OPS.PRODUCT)):
        out[name] = x.clone()
        D.all_reduce(out[name], op)
    out["bxor"] = xi.clone()
    D.all_reduce(out["bxor"], OPS.BXOR)
    out["bcast"] = x.clone()
    D.broadcast(out["bcast"], src=N - 1)
    out["reduce"] = x.clone()
    D.reduce(out["reduce"], dst=0, op=OPS.MAX)
    gathered = [lf.zeros_like(x) for _ in range(N)]
    D.all_gather(gathered, x)
    out.update({f"gathered{i}": g for i, g in enumerate(gathered)})
    out["cat"] = lf.zeros(N * 2 * N, 3)
    D.all_gather_into_tensor(out["cat"], x)
    out["stack"] = lf.zeros(N, 2 * N, 3)
    D.all_gather_into_tensor(out["stack"], x)
    out["rs"] = lf.zeros(2, 3)
    D.reduce_scatter_tensor(out["rs"], x)
    out["rsmax"] = lf.zeros(2, 3)
    D.reduce_scatter_tensor(out["rsmax"], x, OPS.MAX)
    out["a2a"] = lf.zeros(2 * N, 3)
    D.all_to_all_single(out["a2a"], x)
    out["scatter"] = lf.zeros(2 * N, 3)
    D.scatter(out["scatter"], [x * (i + 1) for i in range(N)] if R == 0 else None, src=0)
    gl = [lf.zeros_like(x) for _ in range(N)] if R == N - 1 else None
    D.gather(x, gl, dst=N - 1)
    if gl is not None:
        out.update({f"gl{i}": g for i, g in enumerate(gl)})
    return out


@check
def compiled_collectives_match_numpy_and_eager():
    a, ai = per_rank((2 * N, 3), seed=500), per_rank((2 * N, 3), np.int32, seed=501)
    want = {"sum": a.sum(0), "avg": a.mean(0), "max": a.max(0), "min": a.min(0), "prod": a.prod(0)}
    want |= {"bxor": np.bitwise_xor.reduce(ai, 0), "bcast": a[N - 1], "reduce": a.max(0) if R == 0 else a[R]}
    want |= {f"gathered{i}": a[i] for i in range(N)}
    want |= {"cat": a.reshape(N * 2 * N, 3), "stack": a}
    want |= {"rs": a.sum(0)[2 * R : 2 * R + 2], "rsmax": a.max(0)[2 * R : 2 * R + 2]}
    want |= {"a2a": np.concatenate([a[j][2 * R : 2 * R + 2] for j in range(N)]), "scatter": a[0] * (R + 1)}
    if R == N - 1:
        want |= {f"gl{i}": a[i] for i in range(N)}
    x, xi = lf.tensor(a[R]), lf.tensor(ai[R])
    eager = every_collective(x, xi)
    f = lf.compile(every_collective)
    with lf.no_grad():
        for _ in range(2):
            got = f(x, xi)
            assert sorted(got) == sorted(want) == sorted(eager)
            for k, v in want.items():
                np.testing.assert_allclose(got[k].numpy(), v, rtol=1e-5, atol=1e-5, err_msg=k)
                np.testing.assert_allclose(got[k].numpy(), eager[k].numpy(), rtol=1e-6, atol=1e-6, err_msg=k)
                assert got[k].numpy().dtype == v.dtype, (k, got[k].numpy().dtype)
    np.testing.assert_array_equal(x.numpy(), a[R])  # inputs untouched (the collectives wrote clones)
    info = f.cache_info()  # one trace that met the collectives, one as a shard_map; the second call a hit
    assert (info.traces, info.compiles, info.hits) == (2, 1, 1), info


@check
def compiled_in_place_on_an_argument_and_async_work():
    a = per_rank((3,), seed=510)

    def f(t):
        w = D.all_reduce(t, OPS.AVG, async_op=True)
        assert w.wait() and w.is_completed()
        return t * 2

    with lf.no_grad():
        np.testing.assert_allclose(lf.compile(f)(lf.tensor(a[R])).numpy(), 2 * a.mean(0), rtol=1e-6)


@check
def graph_ddp_step_matches_one_process_and_eager_ddp():
    results = []
    for compiled in (True, False):
        m = mlp(R)  # DDP copies rank 0's weights
        ddp = nn.parallel.DistributedDataParallel(m)
        opt = lf.optim.SGD(ddp.parameters(), lr=LR, momentum=MOM)

        class Step(nn.Graph):
            def __init__(self, ddp, opt):
                super().__init__()
                self.m = ddp
                self.add_optimizer(opt)

            def build(self, x, y):
                loss = ((self.m(x) - y) ** 2).mean()
                loss.backward()  # the gradient averaging runs inside the compiled step
                return loss

        step = Step(ddp, opt)
        losses = []
        for x, y in DATA:
            if compiled:
                losses.append(step(my_slice(x), my_slice(y)).item())
            else:
                opt.zero_grad()
                loss = ((ddp(my_slice(x)) - my_slice(y)) ** 2).mean()
                loss.backward()
                opt.step()
                losses.append(loss.item())
        if compiled:
            assert step._program.cache_info().compiles == 1
        results.append((state(m), losses))
    ref = reference(STEPS)
    (graph, graph_losses), (eager, eager_losses) = results
    np.testing.assert_allclose(graph_losses, eager_losses, rtol=1e-5)  # each rank's local loss, both modes
    for k, v in graph.items():
        np.testing.assert_allclose(v, ref[k], rtol=1e-5, atol=1e-6, err_msg=k)
        np.testing.assert_allclose(v, eager[k], rtol=1e-5, atol=1e-6, err_msg=k)
    slots = [None] * N
    D.all_gather_object(slots, graph)
    for k in graph:  # the replicas stay equal
        for r in range(1, N):
            np.testing.assert_array_equal(slots[r][k], slots[0][k])


@check
def compiled_mismatches_raise_on_every_rank():
    f = lf.compile(lambda t: (D.all_reduce(t), t)[1])
    with lf.no_grad():
        f(lf.ones(3))
        # rank 0 hits its compiled variant, the others compile a new one: the per-call exchange catches it
        raises(D.DistributedError, lambda: f(lf.ones(3 if R == 0 else 4)), "float32[3]", "float32[4]", "rank 1")
        raises(D.DistributedError, lambda: f(lf.ones(3 + R)), f"rank {N - 1}", "do not match")
        # a compiled program on one rank, an eager collective on the others
        if R == 0:
            raises(D.DistributedError, lambda: f(lf.ones(3)), "a compiled program", "all_reduce of shape (3,)")
        else:
            raises(D.DistributedError, lambda: D.all_reduce(lf.ones(3)), "a compiled program")
        t = lf.ones(3)
        D.all_reduce(t)  # the group still works afterwards
        np.testing.assert_array_equal(t.numpy(), [N] * 3)
        np.testing.assert_array_equal(f(lf.ones(3)).numpy(), [N] * 3)


@check
def compiled_index_check_on_one_rank_raises_on_every_rank():
    def f(x, i):
        D.all_reduce(x)
        return x[i]

    g = lf.compile(f)
    with lf.no_grad():
        ok = g(lf.ones(4), lf.tensor([0, 3]))
        np.testing.assert_array_equal(ok.numpy(), [N, N])
        bad = lf.tensor([0, 7 if R == N - 1 else 1])  # out of range on the last rank only
        raises(IndexOutOfRangeError, lambda: g(lf.ones(4), bad), "7")


@check
def compiled_collectives_bad_input():
    with lf.no_grad():
        permuted = D.new_group(list(range(N))[::-1], sort_ranks=False)  # every rank, in another order
        fn = lf.compile(lambda t: (D.all_reduce(t, group=permuted), t)[1])
        raises(NotSupportedError, lambda: fn(lf.ones(2)), "sub-group", "eagerly")
        splits = lf.compile(lambda o, t: (D.all_to_all_single(o, t, [1] * N, [1] * N), o)[1])
        raises(NotSupportedError, lambda: splits(lf.zeros(N), lf.ones(N)), "split sizes")
        outside = lf.ones(2)
        raises(GraphError, lambda: lf.compile(lambda t: (D.all_reduce(outside), t)[1])(lf.ones(2)), "captured")
        dp = lf.compile(lambda t: (D.all_reduce(t), t)[1])
        dp.config.data_parallel(jax.sharding.Mesh(np.array(jax.devices()), ("data",)))
        raises(NotSupportedError, lambda: dp(lf.ones(2 * N)), "data_parallel")

    def raw(v):  # another tracer than lf.compile / nn.Graph
        t = lf.from_jax(v)
        D.all_reduce(t)
        return t._value

    raises(NotSupportedError, lambda: jax.jit(raw)(jax.numpy.ones(2)), "lf.compile and lf.nn.Graph")
    w = lf.ones(2, requires_grad=True)
    grads = lf.compile(lambda t: (D.all_reduce(t), t * w)[1])
    raises(NotSupportedError, lambda: grads(lf.ones(2)), "gradients", "no_grad")


@check
def barrier_with_torchs_signature():
    assert D.barrier() is None
    assert D.barrier(group=None, async_op=False, device_ids=[0]) is None
    w = D.barrier(async_op=True)
    assert w.wait() and w.is_completed()
    assert D.barrier(D.new_group()) is None
    if R == 0:
        raises(D.DistributedError, lambda: D.barrier(), "barrier", "all_reduce")
    else:
        raises(D.DistributedError, lambda: D.all_reduce(lf.ones(1)), "barrier", "all_reduce")
    with lf.no_grad():  # inside compiled code: a no-op beside the program's own collectives
        f = lf.compile(lambda t: (D.barrier(), D.all_reduce(t), t)[2])
        np.testing.assert_array_equal(f(lf.ones(2)).numpy(), [N, N])
