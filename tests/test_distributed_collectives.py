"""Eager collectives, DistributedDataParallel and DataParallel.

* tests/_dist_scripts/mp_collectives.py runs under the launcher with 2 and 4 processes (one CPU device each,
  loopback): every collective vs numpy on the stacked per-rank values, sub-groups, mismatched calls across ranks,
  bad arguments, DDP training vs plain JAX on the concatenated batch, no_sync, and state dicts exchanged with
  torch's DDP (torch writes the checkpoint the script loads; torch loads the one the script writes).
* tests/_dist_scripts/mp_compiled.py (in the same launch): collectives inside lf.compile / nn.Graph vs numpy and
  vs the same function run eagerly, a DDP step inside an nn.Graph vs plain JAX and eager DDP, mismatched compiled
  calls across ranks (an error on every rank, never a hang), barrier with torch's signature.
* A rank that dies while its peer waits in a collective ends the job with the launcher's error, never a hang.
* In this process: collectives before init_process_group, and the autograd engine's post-accumulate-grad hooks.
* tests/_dist_scripts/dp_local.py: nn.DataParallel over 4 virtual devices of one process.
"""

import os
import sys

import numpy as np
import pytest
import torch

import lazyflow as lf
from lazyflow.autograd.engine import queue_callback, register_post_accumulate_grad_hook

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "_dist_scripts"))
import _checks
from test_distributed_multiprocess import _run

D = lf.distributed
SCRIPT = "mp_collectives.py"


def torch_mlp():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))


def torch_ddp(model, tmp_path):
    """torch's DDP over a 1-process gloo group (its state_dict is what a torch DDP training script saves)."""
    import torch.distributed as td

    td.init_process_group("gloo", init_method=f"file://{tmp_path}/torch_store", rank=0, world_size=1)
    try:
        return {k: v.numpy().copy() for k, v in torch.nn.parallel.DistributedDataParallel(model).state_dict().items()}
    finally:
        td.destroy_process_group()


@pytest.fixture(scope="module", params=[2, 4])  # world size 1 left out for CI time (torch needs init too)
def world(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"w{request.param}")
    theirs = torch_ddp(torch_mlp(), tmp)
    assert all(k.startswith("module.") for k in theirs)
    np.savez(tmp / "torch_ddp.npz", **theirs)
    code, out, _ = _run(request.param, SCRIPT, str(tmp), devices=1, timeout=300)
    per_rank = {
        r: "".join(ln[len(f"[rank {r}] ") :] + "\n" for ln in out.splitlines() if ln.startswith(f"[rank {r}] "))
        for r in range(request.param)
    }
    return request.param, code, out, per_rank, tmp, theirs


@pytest.mark.parametrize("name", _checks.names(SCRIPT) + _checks.names("mp_compiled.py"))
def test_collective_checks(world, name):
    n, code, out, per_rank, _, _ = world
    for r in range(n):
        _checks.outcome(per_rank[r], name)
    assert code == 0, out[-4000:]


def test_lazyflow_ddp_checkpoint_loads_into_torch_ddp(world):
    n, code, out, _, tmp, theirs = world
    assert code == 0, out[-4000:]
    ours = [dict(np.load(tmp / f"lf_ddp_rank{r}.npz")) for r in range(n)]
    assert list(ours[0]) == list(theirs)
    model = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    wrapped = torch.nn.Module()
    wrapped.module = model  # the key layout of torch's DDP: module.<key>
    wrapped.load_state_dict({k: torch.from_numpy(v) for k, v in ours[0].items()})
    for k, v in ours[0].items():
        np.testing.assert_array_equal(wrapped.state_dict()[k].numpy(), theirs[k])  # the script loaded torch's
        for r in range(1, n):
            np.testing.assert_array_equal(ours[r][k], v)


def test_a_rank_that_dies_ends_its_peer_in_a_collective():
    code, out, took = _run(2, SCRIPT, "die", devices=1, timeout=200)
    assert code == 1, out[-4000:]
    assert "[rank 1] RuntimeError: rank 1 died before the all_reduce" in out
    assert "[launcher] rank 1 exited with status 1" in out
    assert "finished an all_reduce without rank 1" not in out
    assert took < 120, took


def test_collectives_before_init_raise_like_torch():
    t = lf.ones(2)
    for call in (
        lambda: D.all_reduce(t),
        lambda: D.broadcast(t, 0),
        lambda: D.all_gather([t], t),
        lambda: D.new_group([0]),
        lambda: lf.nn.parallel.DistributedDataParallel(lf.nn.Linear(2, 2)),
    ):
        with pytest.raises(D.DistributedNotInitializedError, match="init_process_group") as e:
            call()
        assert isinstance(e.value, ValueError) and isinstance(e.value, D.DistributedError)
    assert t.tolist() == [1.0, 1.0] and D.is_available() and not D.is_initialized()


def test_post_accumulate_grad_hooks_run_once_after_accumulation():
    w = lf.tensor([1.0, 2.0], requires_grad=True)
    seen, order = [], []

    def hook(t):
        seen.append(t.grad.tolist())
        order.append("hook")
        queue_callback(lambda: order.append("callback"))

    handle = register_post_accumulate_grad_hook(w, hook)
    (w * w + 3 * w).sum().backward()  # w reaches the leaf along two paths: one call, the full gradient
    assert seen == [[5.0, 7.0]] and order == ["hook", "callback"]
    (w * 2).sum().backward()
    assert seen[-1] == [7.0, 9.0]  # after accumulation into the existing .grad
    lf.autograd.grad((w * w).sum(), w)  # .grad untouched: no hook
    assert len(seen) == 2
    handle.remove()
    handle.remove()
    (w * 2).sum().backward()
    assert len(seen) == 2 and order == ["hook", "callback", "hook", "callback"]


def test_hook_handles_do_not_keep_their_owner_alive():
    import gc
    import weakref

    from lazyflow.autograd import engine

    class Owner:
        pass

    w = lf.tensor([1.0], requires_grad=True)
    owner = Owner()
    ref = weakref.ref(owner)
    handle = register_post_accumulate_grad_hook(w, lambda t, r=ref: r())
    weakref.finalize(owner, handle.remove)
    del owner
    gc.collect()
    assert ref() is None and id(w) not in engine._post_accumulate
    (w * 2).sum().backward()  # no hook left to run
    assert w.grad.tolist() == [2.0]


def test_data_parallel_over_local_devices():
    out = _checks.run_script("dp_local.py", devices=4, timeout=300)
    for name in _checks.names("dp_local.py"):
        _checks.outcome(out, name)


@pytest.mark.parametrize(
    "name",
    "all_reduce broadcast reduce all_gather all_gather_into_tensor reduce_scatter_tensor all_to_all_single scatter "
    "gather new_group get_rank get_world_size barrier".split(),
)
def test_signatures_follow_torch(name):
    """Our parameters are a prefix of torch.distributed's (same names, same positional order)."""
    import inspect

    import torch.distributed as td

    theirs = list(inspect.signature(getattr(td, name)).parameters)
    ours = list(inspect.signature(getattr(D, name)).parameters)
    assert ours == theirs[: len(ours)], (ours, theirs)


def test_wrapper_signatures_and_reduce_ops_follow_torch():
    import inspect

    import torch.distributed as td

    ddp = list(inspect.signature(lf.nn.parallel.DistributedDataParallel).parameters)
    theirs = list(inspect.signature(torch.nn.parallel.DistributedDataParallel).parameters)
    assert ddp[:-1] == theirs[: len(ddp) - 1] and ddp[-1] == "kwargs"
    dp = list(inspect.signature(lf.nn.DataParallel).parameters)
    assert dp == list(inspect.signature(torch.nn.DataParallel).parameters)
    assert lf.nn.parallel.DataParallel is lf.nn.DataParallel
    torch_ops = [n for n in td.ReduceOp.RedOpType.__members__ if n != "PREMUL_SUM"]
    assert [op.name for op in D.ReduceOp] == torch_ops
