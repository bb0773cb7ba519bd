"""``lf.cuda``, ``lf.accelerator``, ``lf.backends``, the float32 matmul precision and ``lf.jit`` against torch 2.13.

On a machine without a GPU (where CI runs) every call is compared with torch's CPU build -- the oracle: same value and
type, or an exception of the class torch raises. The GPU branches run against a fake JAX GPU whose statistics are
the reference. ``lf.jit.script/trace`` are compared with the plain module and with torch's own jit of the same
weights.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict

import jax
import numpy as np
import pytest
import torch

import lazyflow as lf
import lazyflow.cuda as lcuda

NO_GPU = not lf.cuda.is_available() and not torch.cuda.is_available()
cpu_only = pytest.mark.skipif(not NO_GPU, reason="torch's CPU build is the oracle for a machine without a GPU")


def _enter(ctx):
    with ctx:
        return None


# every call, spelled the same for torch and lazyflow (``m``); run on a machine without a GPU
CALLS = [
    "m.cuda.is_available()",
    "m.cuda.device_count()",
    "m.cuda.current_device()",
    "m.cuda.set_device(0)",
    "m.cuda.set_device('cuda:1')",
    "m.cuda.set_device(-1)",
    "m.cuda.set_device('cpu')",
    "m.cuda.set_device('cuda')",
    "m.cuda.set_device(m.device('cuda'))",
    "m.cuda.set_device(None)",
    "m.cuda.synchronize()",
    "m.cuda.synchronize('cpu')",
    "m.cuda.manual_seed(1)",
    "m.cuda.manual_seed_all(1)",
    "m.cuda.get_device_name()",
    "m.cuda.get_device_name(0)",
    "m.cuda.get_device_properties()",
    "m.cuda.get_device_properties(0)",
    "m.cuda.memory_allocated()",
    "m.cuda.memory_allocated(0)",
    "m.cuda.memory_allocated('cpu')",
    "m.cuda.memory_allocated('cuda:3')",
    "m.cuda.max_memory_allocated()",
    "m.cuda.max_memory_allocated(0)",
    "m.cuda.memory_reserved()",
    "m.cuda.memory_reserved('cuda')",
    "m.cuda.reset_peak_memory_stats()",
    "m.cuda.empty_cache()",
    "m.cuda.is_bf16_supported()",
    "m.cuda.is_bf16_supported(False)",
    "enter(m.cuda.device(0))",
    "enter(m.cuda.device('cuda:0'))",
    "enter(m.cuda.device(-1))",
    "m.cuda.device('cpu')",
    "m.accelerator.is_available()",
    "m.accelerator.current_accelerator()",
    "m.accelerator.current_accelerator(check_available=True)",
    "m.accelerator.device_count()",
    "m.accelerator.current_device_index()",
    "m.accelerator.set_device_index(0)",
    "m.accelerator.set_device_index(-1)",
    "m.accelerator.synchronize()",
    "m.accelerator.synchronize('cpu')",
    "enter(m.accelerator.device_index(None))",
    "enter(m.accelerator.device_index(0))",
    "enter(m.accelerator.device_index(-1))",
    "m.backends.cuda.is_built()",
    "m.backends.cudnn.is_available()",
    "m.backends.mps.is_available()",
    "m.backends.mps.is_built()",
    "m.backends.cpu.get_cpu_capability()",
    "m.get_float32_matmul_precision()",
    "m.jit.is_scripting()",
    "m.jit.is_tracing()",
]


def _call(expr, m):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return "value", eval(expr, {"m": m, "enter": _enter})
    except Exception as e:  # the exception itself is the answer compared
        return "raised", e


@cpu_only
@pytest.mark.parametrize("expr", CALLS)
def test_answers_as_torchs_cpu_build(expr):
    how_t, theirs = _call(expr, torch)
    how_l, ours = _call(expr, lf)
    assert how_l == how_t, f"{expr}: torch {how_t} {theirs!r}, lazyflow {how_l} {ours!r}"
    if how_t == "raised":
        assert isinstance(ours, type(theirs)), f"{expr}: torch raises {type(theirs).__name__}, lazyflow {ours!r}"
        assert isinstance(ours, lf.LazyflowError), f"{expr}: {ours!r} is not a named lazyflow error"
    else:
        assert type(ours).__name__ == type(theirs).__name__ or (ours is None and theirs is None), expr
        assert ours == theirs, expr


@cpu_only
def test_the_oracle_is_a_cpu_build():
    """The table above means something only if torch here has no CUDA (its CPU build)."""
    assert torch.version.cuda is None and not torch.cuda.is_available()


def test_no_cuda_error_says_how_to_fix():
    if lf.cuda.is_available():
        pytest.skip("the machine has a GPU")
    with pytest.raises(lf.NoCudaError, match=r"jax\[cuda12\].*is_available"):
        lf.cuda.current_device()


@cpu_only
def test_cuda_manual_seed_leaves_the_cpu_generator_alone_like_torch():
    for m in (torch, lf):
        m.manual_seed(5)
        a = m.rand(4)
        m.manual_seed(5)
        m.cuda.manual_seed(123)
        m.cuda.manual_seed_all(7)
        b = m.rand(4)
        assert (np.asarray(a) == np.asarray(b)).all(), m.__name__


@cpu_only
def test_cuda_amp_autocast_warns_and_disables_itself_like_torch():
    for m in (torch, lf):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            ctx = m.cuda.amp.autocast()
        assert [x.category for x in w] == [FutureWarning, UserWarning], m.__name__
        with ctx:
            y = m.ones(2, 2) @ m.ones(2, 2)
        assert str(y.dtype).endswith("float32"), m.__name__


def test_cuda_amp_autocast_is_lazyflows_autocast_with_cuda_defaults():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ctx = lf.cuda.amp.autocast(enabled=False, dtype=lf.bfloat16)
        assert ctx.dtype == lf.bfloat16 and lf.cuda.amp.autocast(enabled=False).dtype == lf.float16
    assert isinstance(ctx, lf.autocast)


# ---------------------------------------------------------------- the GPU branches, on a fake JAX GPU
class _FakeGpu:
    platform = "gpu"
    id = 0
    device_kind = "NVIDIA Fake 80GB"
    compute_capability = "9.0"
    core_count = 132

    def __init__(self):
        self.stats = {"bytes_in_use": 1000, "peak_bytes_in_use": 5000, "bytes_limit": 80 << 30, "pool_bytes": 8192}

    def memory_stats(self):
        return dict(self.stats)


@pytest.fixture
def fake_gpu(monkeypatch):
    gpu = _FakeGpu()
    monkeypatch.setattr(lcuda._common, "devices_of", lambda t: [gpu] if t == "cuda" else [])
    monkeypatch.setattr(lcuda.memory, "_peak_floor", {})
    yield gpu
    lcuda.set_current_index("cuda", 0)


def test_gpu_queries_read_jax_device(fake_gpu):
    assert lf.cuda.is_available() and lf.cuda.device_count() == 1 and lf.cuda.current_device() == 0
    assert lf.cuda.get_device_name() == lf.cuda.get_device_name("cuda:0") == "NVIDIA Fake 80GB"
    p = lf.cuda.get_device_properties(0)
    assert (p.name, p.major, p.minor, p.total_memory, p.multi_processor_count) == (
        "NVIDIA Fake 80GB",
        9,
        0,
        80 << 30,
        132,
    )
    assert lf.cuda.is_bf16_supported(False) and lf.cuda.is_bf16_supported()
    lf.cuda.set_device(0)
    with lf.cuda.device(0):
        assert lf.cuda.current_device() == 0
    with pytest.raises(lf.ValueRangeError, match="cuda:1"):
        lf.cuda.set_device(1)
    with pytest.raises(ValueError):
        lf.cuda.set_device("cpu")


def test_gpu_memory_counters_and_peak_reset(fake_gpu):
    assert (lf.cuda.memory_allocated(), lf.cuda.max_memory_allocated(), lf.cuda.memory_reserved()) == (1000, 5000, 8192)
    lf.cuda.reset_peak_memory_stats()
    assert lf.cuda.max_memory_allocated() == 1000  # JAX's peak predates the reset: the current usage
    fake_gpu.stats.update(bytes_in_use=3000, peak_bytes_in_use=7000)
    assert lf.cuda.max_memory_allocated() == 7000  # risen past the reset: a peak since the reset
    assert lf.cuda.empty_cache() is None


def test_gpu_manual_seed_seeds_the_one_generator(fake_gpu):
    lf.cuda.manual_seed(11)
    a = lf.rand(3)
    lf.manual_seed(11)
    assert np.array_equal(np.asarray(a), np.asarray(lf.rand(3)))


# ---------------------------------------------------------------- settable flags, float32 matmul precision
FLAGS = [
    "cuda.matmul.allow_tf32",
    "cuda.matmul.allow_fp16_reduced_precision_reduction",
    "cuda.matmul.allow_bf16_reduced_precision_reduction",
    "cudnn.benchmark",
    "cudnn.deterministic",
    "cudnn.allow_tf32",
    "cudnn.enabled",
]


@pytest.fixture
def restore_precision():
    prev = jax.config.jax_default_matmul_precision
    yield
    jax.config.update("jax_default_matmul_precision", prev)


def _resolve(root, path):
    *parents, name = path.split(".")
    for p in parents:
        root = getattr(root, p)
    return root, name


@cpu_only
@pytest.mark.parametrize("path", FLAGS)
def test_flag_has_torchs_default_and_round_trips(path, restore_precision):
    ours, name = _resolve(lf.backends, path)
    theirs, _ = _resolve(torch.backends, path)
    default = getattr(theirs, name)
    assert getattr(ours, name) is default
    setattr(ours, name, not default)
    assert getattr(ours, name) is (not default)
    setattr(ours, name, default)
    assert getattr(ours, name) is default


@pytest.mark.parametrize(("precision", "in_jax"), [("highest", "highest"), ("high", "high"), ("medium", "default")])
def test_matmul_precision_reaches_jax_config(precision, in_jax, restore_precision):
    lf.set_float32_matmul_precision(precision)
    assert jax.config.jax_default_matmul_precision == in_jax
    assert lf.get_float32_matmul_precision() == precision
    assert lf.backends.cuda.matmul.allow_tf32 is (precision != "highest")


def test_allow_tf32_sets_the_matmul_precision(restore_precision):
    lf.backends.cuda.matmul.allow_tf32 = True
    assert jax.config.jax_default_matmul_precision == "high" and lf.get_float32_matmul_precision() == "high"
    lf.backends.cuda.matmul.allow_tf32 = False
    assert jax.config.jax_default_matmul_precision == "highest" and lf.get_float32_matmul_precision() == "highest"


def test_unknown_precision_warns_and_changes_nothing_like_torch(restore_precision):
    for m in (torch, lf):
        before = m.get_float32_matmul_precision()
        with pytest.warns(UserWarning, match="not one of"):
            m.set_float32_matmul_precision("bad")
        assert m.get_float32_matmul_precision() == before


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the claim is about XLA:CPU")
def test_precision_changes_no_number_on_cpu(restore_precision):
    """The documented claim: on CPU every level gives full float32 matmuls (compared with float64 numpy)."""
    a = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    f = lf.compile(lambda x: x @ x)
    results = []
    for precision in ("highest", "high", "medium"):
        lf.set_float32_matmul_precision(precision)
        x = lf.from_numpy(a.copy())
        results += [np.asarray(x @ x), np.asarray(f(x))]
    for r in results:
        np.testing.assert_array_equal(r, results[0])
    np.testing.assert_allclose(results[0], a.astype(np.float64) @ a.astype(np.float64), rtol=1e-4, atol=1e-4)


def test_script_prologue_runs(monkeypatch):
    monkeypatch.setattr(lf.backends.cudnn, "benchmark", False)
    device = "cuda" if lf.cuda.is_available() else "cpu"
    lf.backends.cudnn.benchmark = True
    lf.backends.cudnn.deterministic = False
    lf.cuda.manual_seed_all(0)
    model = lf.nn.Linear(3, 2).to(device)
    out = model(lf.ones(1, 3, device=device))
    assert out.shape == (1, 2) and str(out.device).startswith(device)


# ---------------------------------------------------------------- lf.jit
def _pair():
    tm = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Dropout(0.5), torch.nn.Linear(8, 3))
    lm = lf.nn.Sequential(lf.nn.Linear(4, 8), lf.nn.Tanh(), lf.nn.Dropout(0.5), lf.nn.Linear(8, 3))
    lm.load_state_dict({k: lf.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    tm.eval()
    lm.eval()
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    return tm, lm, x


@pytest.mark.parametrize("how", ["script", "trace"])
def test_jit_of_a_module_gives_the_modules_and_torchs_numbers(how):
    tm, lm, x = _pair()
    if how == "script":
        ts, ls = torch.jit.script(tm), lf.jit.script(lm)
    else:
        ts, ls = torch.jit.trace(tm, torch.from_numpy(x)), lf.jit.trace(lm, lf.from_numpy(x))
    ours = np.asarray(ls(lf.from_numpy(x)))
    np.testing.assert_allclose(ours, np.asarray(lm(lf.from_numpy(x))), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ours, ts(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert list(ls.state_dict()) == list(lm.state_dict()) == list(ts.state_dict())
    assert isinstance(ls, lf.graph.CompiledModule)


def test_scripted_module_follows_train_and_eval():
    _, lm, x = _pair()
    ls = lf.jit.script(lm)
    ls.train()
    assert lm.training
    lf.manual_seed(0)
    y = np.asarray(ls(lf.from_numpy(x)))
    ls.eval()
    assert not lm.training and not np.allclose(y, np.asarray(ls(lf.from_numpy(x))))


def test_jit_of_a_function_gives_torchs_numbers():
    def f(x, y):
        return (x * y + 1).sum(dim=1)

    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    ours = lf.jit.script(f)(lf.from_numpy(a), lf.from_numpy(a))
    theirs = torch.jit.script(f)(torch.from_numpy(a), torch.from_numpy(a))
    np.testing.assert_array_equal(np.asarray(ours), theirs.numpy())
    traced = lf.jit.trace(f, (lf.from_numpy(a), lf.from_numpy(a)))
    np.testing.assert_array_equal(np.asarray(traced(lf.from_numpy(a), lf.from_numpy(a))), theirs.numpy())


def test_trace_runs_the_example_once_and_is_tracing_inside():
    seen = []

    def f(x):
        seen.append((lf.jit.is_tracing(), lf.jit.is_scripting()))
        return x * 2

    traced = lf.jit.trace(f, lf.ones(3))
    assert seen == [(True, False)]  # traced once, on the example
    traced(lf.ones(3))
    assert len(seen) == 1  # same signature: the compiled program, no new trace
    theirs = []
    torch.jit.trace(lambda x: theirs.append(torch.jit.is_tracing()) or x * 2, torch.ones(3), check_trace=False)
    assert theirs == [True]
    assert lf.jit.is_tracing() is torch.jit.is_tracing() is False


def test_trace_without_example_raises():
    with pytest.raises(lf.ArgumentError, match="example_inputs"):
        lf.jit.trace(lambda x: x)


def test_script_of_compiled_or_class_is_unchanged():
    cm = lf.compile(lf.nn.Linear(2, 2))
    assert lf.jit.script(cm) is cm
    assert lf.jit.script(OrderedDict) is OrderedDict
    with pytest.raises(lf.ArgumentError):
        lf.jit.script(3)


def test_ignore_and_unused_return_the_function_like_torch():
    def f(x):
        return x

    for m in (torch, lf):
        assert m.jit.ignore(f) is f and m.jit.unused(f) is f
        with pytest.warns(FutureWarning, match="deprecated"):
            dec = m.jit.ignore(drop=True)
        assert dec(f) is f
        with pytest.raises(RuntimeError):
            m.jit.ignore("x")


@pytest.mark.parametrize("call", [lambda: lf.jit.save(lf.nn.Linear(1, 1), "m.pt"), lambda: lf.jit.load("m.pt")])
def test_jit_save_and_load_point_at_lf_save_and_load(call, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(lf.NotSupportedError, match=r"lf\.(save|load)") as e:
        call()
    assert isinstance(e.value, NotImplementedError)
    assert not list(tmp_path.iterdir())
