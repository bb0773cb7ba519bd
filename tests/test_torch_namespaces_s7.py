"""torch namespaces and idioms of model files (session 7): ``with lf.device(...)``, ``Module.to_empty``,
``lf.random``; reference: torch called the same way."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import lazyflow as lf


def test_device_context_sets_the_default_device_and_restores_it():
    """Two CPU devices (a fresh process with XLA's host device count 2): tensors made in the block land on the
    block's device, nested blocks restore their outer device, and a bad device leaves the default unchanged."""
    code = (
        "import lazyflow as lf\n"
        "dev = lambda t: next(iter(t._value.devices())).id\n"
        "with lf.device('cpu', 1) as d:\n"
        "    assert d == lf.device('cpu', 1)\n"
        "    assert dev(lf.zeros(2)) == dev(lf.randn(2)) == dev(lf.tensor([1.0])) == dev(lf.arange(3)) == 1\n"
        "    with lf.device('cpu:0'):\n"
        "        assert dev(lf.ones(1)) == 0\n"
        "    assert dev(lf.ones(1)) == 1\n"
        "assert dev(lf.zeros(1)) == 0\n"
        "try:\n"
        "    with lf.device('tpu'):\n"
        "        pass\n"
        "except lf.DeviceError:\n"
        "    pass\n"
        "else:\n"
        "    raise AssertionError('no error')\n"
        "assert dev(lf.zeros(1)) == 0\n"
        "print('ok')\n"
    )
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=180)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_device_context_on_the_default_device_as_torchs():
    for lib in (lf, torch):
        with lib.device("cpu"):
            t = lib.zeros(2)
        assert t.device == lib.device("cpu")


def test_to_empty_keeps_structure_dtypes_and_parameters_as_torchs():
    ours = lf.nn.Sequential(lf.nn.Linear(2, 3), lf.nn.BatchNorm1d(3))
    theirs = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3))
    assert ours.to_empty(device="cpu") is ours
    theirs.to_empty(device="cpu")
    so, st = ours.state_dict(), theirs.state_dict()
    assert list(so) == list(st)
    for k in so:
        assert tuple(so[k].shape) == tuple(st[k].shape) and str(so[k].dtype)[9:] == str(st[k].dtype)[6:]
    assert isinstance(ours[0].weight, lf.nn.Parameter) and ours[0].weight.requires_grad
    rng = np.random.default_rng(0)  # then filled (torch's to_empty leaves garbage: fill both with the same values)
    filled = {k: np.abs(rng.standard_normal(tuple(v.shape))).astype(np.float32) + 0.5 for k, v in st.items()}
    filled["1.num_batches_tracked"] = np.array(3, np.int64)
    ours.load_state_dict({k: lf.tensor(v) for k, v in filled.items()})
    theirs.load_state_dict({k: torch.tensor(v) for k, v in filled.items()})
    x = np.ones((4, 2), np.float32)
    ours.eval(), theirs.eval()
    np.testing.assert_allclose(ours(lf.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(), atol=1e-6)
    with pytest.raises(lf.DeviceError):
        ours.to_empty(device="tpu")


def test_random_namespace_and_fork_rng_as_torchs():
    assert set(torch.random.__all__) <= set(dir(lf.random))
    for lib in (lf, torch):
        lib.random.manual_seed(7)
        a = lib.rand(3)
        lib.random.manual_seed(7)
        with lib.random.fork_rng():
            lib.rand(5)
        assert (lib.rand(3) == a).all()  # the block's draws did not move the generator
        lib.random.manual_seed(7)
        with lib.random.fork_rng(enabled=False):
            lib.rand(5)
        assert not (lib.rand(3) == a).all()
        state = lib.random.get_rng_state()
        with pytest.raises(KeyError), lib.random.fork_rng():
            lib.rand(2)
            raise KeyError("inside")
        assert (lib.random.get_rng_state() == state).all()  # restored after an error too
        assert lib.random.initial_seed() == 7


def test_attention_backend_switches_as_torchs():
    import torch.nn.attention as ta
    from torch.nn.attention import SDPBackend as TB

    import lazyflow.nn.attention as la

    assert {b.name: b.value for b in la.SDPBackend} == {n: getattr(TB, n).value for n in dir(TB) if n.isupper()}
    q = np.random.default_rng(0).standard_normal((1, 2, 4, 8)).astype(np.float32)
    for lib, att in ((lf, la), (torch, ta)):
        cuda = lib.backends.cuda
        assert cuda.flash_sdp_enabled() and cuda.math_sdp_enabled() and cuda.mem_efficient_sdp_enabled()
        with att.sdpa_kernel(att.SDPBackend.MATH):
            assert cuda.math_sdp_enabled() and not cuda.flash_sdp_enabled() and not cuda.cudnn_sdp_enabled()
            out = lib.nn.functional.scaled_dot_product_attention(*(lib.tensor(q),) * 3)
        with att.sdpa_kernel([att.SDPBackend.FLASH_ATTENTION, att.SDPBackend.EFFICIENT_ATTENTION]):
            assert cuda.flash_sdp_enabled() and not cuda.math_sdp_enabled()
            same = lib.nn.functional.scaled_dot_product_attention(*(lib.tensor(q),) * 3)
        np.testing.assert_allclose(out.numpy(), same.numpy(), rtol=1e-5, atol=1e-6)
        assert cuda.flash_sdp_enabled() and cuda.math_sdp_enabled()  # restored
        with pytest.warns(FutureWarning):
            with cuda.sdp_kernel(enable_flash=False):
                assert not cuda.flash_sdp_enabled()
        cuda.enable_flash_sdp(False)
        assert not cuda.flash_sdp_enabled()
        cuda.enable_flash_sdp(True)
        assert cuda.is_flash_attention_available() == lf.cuda.is_available()
    with pytest.raises(lf.ArgumentError):
        la.sdpa_kernel(["math"])


def test_private_argument_normalisers_model_files_import():
    from torch.nn.modules import utils as tu

    from lazyflow.nn.modules import utils as lu

    for name in ("_single", "_pair", "_triple", "_quadruple"):
        for x in (3, (1, 2), [4, 5, 6]):
            assert getattr(lu, name)(x) == getattr(tu, name)(x)
    assert lu._reverse_repeat_tuple((1, 2), 2) == tu._reverse_repeat_tuple((1, 2), 2)
    assert lu._list_with_default([None, 3], [8, 9, 10]) == tu._list_with_default([None, 3], [8, 9, 10])
    assert lu._list_with_default(5, [1]) == tu._list_with_default(5, [1]) == 5
    for mod in (lu, tu):
        with pytest.raises(ValueError, match="at least 3"):
            mod._list_with_default([1, 2], [1, 2])


def test_spawn_runs_each_rank_and_reports_failures_as_torchs(tmp_path):
    """Each rank's result as torch's spawn gives it; a rank that raises or exits ends the run with torch's exception
    classes and messages (each spawned child imports its library: a few seconds per wave)."""
    from tests import _mp_targets as T

    for lib, name in ((lf, "lazyflow"), (torch, "torch")):
        out = tmp_path / name
        out.mkdir()
        assert lib.multiprocessing.spawn(T.square_into, args=(name, str(out)), nprocs=2) is None
        got = {p.name: p.read_text() for p in out.iterdir()}
        assert got == {f"{i}.txt": ",".join(str(float((k + i) ** 2)) for k in range(4)) for i in range(2)}
    with pytest.raises(lf.multiprocessing.ProcessRaisedException, match="ValueError: rank 1 refuses") as e:
        lf.multiprocessing.spawn(T.raise_on_one, nprocs=2)
    assert e.value.error_index == 1 and "Process 1 terminated with the following error" in str(e.value)
    with pytest.raises(lf.multiprocessing.ProcessExitedException, match="process 1 terminated with exit code 3") as e:
        lf.multiprocessing.spawn(T.exit_on_one, nprocs=2)
    assert e.value.exit_code == 3 and e.value.error_index == 1
    ctx = lf.multiprocessing.spawn(T.raise_on_one, nprocs=1, join=False)
    assert ctx.join() is True and len(ctx.pids()) == 1


def test_fork_after_jax_started_is_refused_and_sharing_strategies():
    lf.zeros(1).numpy()  # the runtime runs in this process
    with pytest.raises(lf.NotSupportedError, match="hangs"):
        lf.multiprocessing.start_processes(print, nprocs=1, start_method="fork")
    assert lf.multiprocessing.get_all_sharing_strategies() == torch.multiprocessing.get_all_sharing_strategies()
    assert lf.multiprocessing.get_sharing_strategy() == torch.multiprocessing.get_sharing_strategy()
    lf.multiprocessing.set_sharing_strategy("file_system")
    assert lf.multiprocessing.get_sharing_strategy() == "file_system"
    lf.multiprocessing.set_sharing_strategy("file_descriptor")
    with pytest.raises(ValueError):
        lf.multiprocessing.set_sharing_strategy("shm")
    assert set(torch.multiprocessing.__all__) <= set(lf.multiprocessing.__all__)
