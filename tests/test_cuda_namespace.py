"""The rest of ``lf.cuda`` (memory, RNG, streams/events, NVML queries, legacy typed constructors) against torch 2.13.

Without a GPU (where CI runs) each call is compared with torch's CPU build, the oracle: same value and type, or an
exception of the built-in class torch raises that is also a named lazyflow error. The GPU branches run on a fake JAX
GPU whose ``memory_stats()`` are the reference; the stream/event waits are counted.
"""

from __future__ import annotations

import time
import types
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


CALLS = [
    # memory
    "m.cuda.memory_stats()",
    "m.cuda.memory_stats('cuda:1')",
    "m.cuda.memory_stats_as_nested_dict()",
    "m.cuda.memory_summary()",
    "m.cuda.max_memory_reserved()",
    "m.cuda.memory_cached()",
    "m.cuda.max_memory_cached(0)",
    "m.cuda.mem_get_info()",
    "m.cuda.mem_get_info(0)",
    "m.cuda.reset_max_memory_allocated()",
    "m.cuda.reset_max_memory_cached()",
    "m.cuda.reset_accumulated_memory_stats()",
    "m.cuda.set_per_process_memory_fraction(0.5)",
    "m.cuda.get_per_process_memory_fraction()",
    "m.cuda.host_memory_stats()",
    "m.cuda.host_memory_stats_as_nested_dict()",
    "m.cuda.reset_peak_host_memory_stats()",
    "m.cuda.reset_accumulated_host_memory_stats()",
    # rng
    "m.cuda.seed()",
    "m.cuda.seed_all()",
    "m.cuda.initial_seed()",
    "m.cuda.get_rng_state()",
    "m.cuda.get_rng_state('cpu')",
    "m.cuda.get_rng_state_all()",
    "m.cuda.set_rng_state(m.zeros(8, dtype=m.uint8))",
    "m.cuda.set_rng_state_all([])",
    "m.cuda.set_rng_state_all([m.zeros(8, dtype=m.uint8)])",
    # streams and events
    "m.cuda.Stream()",
    "m.cuda.Event()",
    "m.cuda.Event(enable_timing=True)",
    "m.cuda.ExternalStream(0)",
    "m.cuda.current_stream()",
    "m.cuda.default_stream()",
    "m.cuda.get_stream_from_external(0)",
    "m.cuda.set_stream(None)",
    "enter(m.cuda.stream(None))",
    "enter(m.cuda.StreamContext(None))",
    "m.cuda.is_current_stream_capturing()",
    # device queries
    "m.cuda.init()",
    "m.cuda.is_initialized()",
    "m.cuda.get_arch_list()",
    "m.cuda.get_gencode_flags()",
    "m.cuda.get_device_capability()",
    "m.cuda.get_device_capability('cpu')",
    "m.cuda.can_device_access_peer(0, 1)",
    "m.cuda.is_tf32_supported()",
    "m.cuda.get_sync_debug_mode()",
    "m.cuda.set_sync_debug_mode(0)",
    "m.cuda.set_sync_debug_mode('warn')",
    "enter(m.cuda.device_of(m.zeros(1)))",
    "m.cuda.cudaStatus.SUCCESS",
    "m.cuda.cudaStatus.ERROR_NOT_READY",
    # NVML (no pynvml here: torch raises ModuleNotFoundError, or says so for list_gpu_processes)
    "m.cuda.utilization()",
    "m.cuda.memory_usage()",
    "m.cuda.temperature()",
    "m.cuda.power_draw()",
    "m.cuda.clock_rate()",
    "m.cuda.device_memory_used()",
    "m.cuda.list_gpu_processes()",
    # legacy typed constructors
    "m.cuda.FloatTensor([1.0])",
    "m.cuda.LongTensor(2, 3)",
    "m.cuda.BoolTensor()",
    "isinstance(m.zeros(1), m.cuda.FloatTensor)",
    "isinstance(m.zeros(1, dtype=m.int64), m.cuda.LongTensor)",
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
        assert len(str(ours)) > 40, f"{expr}: the message should say why and what to do: {ours}"
    else:
        assert type(ours).__name__ == type(theirs).__name__ or (ours is None and theirs is None), expr
        assert ours == theirs, expr


def test_the_pynvml_module_is_absent_here():
    """The NVML rows above are torch's "not installed" answers only while pynvml is missing."""
    with pytest.raises(ImportError):
        __import__("pynvml")


@cpu_only
def test_no_gpu_errors_say_why_and_how_to_fix():
    with pytest.raises(lf.NoCudaError, match=r"no GPU|none here.*jax\[cuda12\]"):
        lf.cuda.Event()
    with pytest.raises(TypeError, match="FloatTensor.*jax\\[cuda12\\]"):
        lf.cuda.FloatTensor([1.0])
    with pytest.raises(KeyError) as e:
        lf.cuda.memory_summary()
    assert str(e.value).startswith("lf.cuda.memory_summary()")  # not quoted as a key
    with pytest.raises(ModuleNotFoundError, match="pip install nvidia-ml-py"):
        lf.cuda.utilization()


def test_cuda_error_classes():
    e = lf.cuda.CudaError(2)
    assert isinstance(e, RuntimeError) and isinstance(e, lf.LazyflowError) and e.code == 2 and "2" in str(e)
    assert issubclass(lf.cuda.DeferredCudaCallError, Exception)
    assert issubclass(torch.cuda.CudaError, RuntimeError)  # the class torch's subclasses


# ---------------------------------------------------------------- the GPU branches, on a fake JAX GPU
class _FakeGpu:
    platform = "gpu"
    device_kind = "NVIDIA Fake 80GB"
    compute_capability = "9.0"
    core_count = 132

    def __init__(self, id=0):
        self.id = id
        self.stats = {
            "bytes_in_use": 1000,
            "peak_bytes_in_use": 5000,
            "bytes_limit": 80 << 30,
            "pool_bytes": 8192,
            "peak_pool_bytes": 9000,
        }

    def memory_stats(self):
        return dict(self.stats)


@pytest.fixture
def gpus(monkeypatch):
    devs = [_FakeGpu(0), _FakeGpu(1)]
    drained = []
    monkeypatch.setattr(lcuda._common, "devices_of", lambda t: devs if t == "cuda" else [])
    monkeypatch.setattr(lcuda.memory, "_peak_floor", {})
    monkeypatch.setattr(lcuda.streams, "_drain", drained.append)
    yield devs, drained
    lcuda.set_current_index("cuda", 0)
    lcuda.streams._current.__dict__.clear()


def test_gpu_memory_stats_use_torchs_keys(gpus):
    stats = lf.cuda.memory_stats()
    assert isinstance(stats, OrderedDict) and list(stats) == sorted(stats)
    assert stats["allocated_bytes.all.current"] == 1000 and stats["allocated_bytes.all.peak"] == 5000
    assert stats["reserved_bytes.all.current"] == 8192 and stats["reserved_bytes.all.peak"] == 9000
    nested = lf.cuda.memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["all"]["current"] == 1000 and nested["reserved_bytes"]["all"]["peak"] == 9000
    assert (lf.cuda.max_memory_reserved(), lf.cuda.memory_cached(), lf.cuda.max_memory_cached()) == (9000, 8192, 9000)
    assert lf.cuda.mem_get_info(1) == ((80 << 30) - 1000, 80 << 30)
    summary = lf.cuda.memory_summary()
    assert "allocated_bytes.all.current" in summary and "1,000" in summary
    with pytest.warns(FutureWarning):
        lf.cuda.reset_max_memory_allocated()
    assert lf.cuda.max_memory_allocated() == 1000  # JAX's peak predates the reset
    gpus[0][0].stats.update(bytes_in_use=2000, peak_bytes_in_use=6000)
    assert lf.cuda.memory_stats()["allocated_bytes.all.peak"] == 6000
    assert lf.cuda.reset_accumulated_memory_stats() is None and lf.cuda.reset_peak_host_memory_stats() is None
    with pytest.raises(lf.ValueRangeError, match="cuda:5"):
        lf.cuda.memory_stats(5)


def test_gpu_memory_fraction_checks_and_warns(gpus, monkeypatch):
    monkeypatch.delenv("XLA_PYTHON_CLIENT_MEM_FRACTION", raising=False)
    assert lf.cuda.get_per_process_memory_fraction() == 0.75
    monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", ".5")
    assert lf.cuda.get_per_process_memory_fraction() == 0.5
    with pytest.warns(UserWarning, match="XLA_PYTHON_CLIENT_MEM_FRACTION"):
        lf.cuda.set_per_process_memory_fraction(0.3)
    with pytest.raises(TypeError, match="float"):
        lf.cuda.set_per_process_memory_fraction(1)
    with pytest.raises(ValueError, match="0~1"):
        lf.cuda.set_per_process_memory_fraction(1.5)


def test_gpu_device_queries(gpus):
    assert lf.cuda.get_device_capability() == (9, 0) and lf.cuda.is_tf32_supported()
    assert lf.cuda.get_arch_list() == ["sm_90"]
    assert lf.cuda.get_gencode_flags() == "-gencode compute=compute_90,code=sm_90"
    assert lf.cuda.can_device_access_peer(0, 1) and not lf.cuda.can_device_access_peer(1, 1)
    assert lf.cuda.is_initialized() and lf.cuda.init() is None
    with pytest.raises(lf.ValueRangeError):
        lf.cuda.can_device_access_peer(0, 7)


def _guard():
    return jax.config.jax_transfer_guard_device_to_host  # pyright: ignore[reportAttributeAccessIssue]


def test_gpu_sync_debug_mode_sets_jaxs_transfer_guard(gpus):
    prev = _guard()
    try:
        for mode, guard, back in [("warn", "log", 1), (2, "disallow", 2), ("default", "allow", 0)]:
            lf.cuda.set_sync_debug_mode(mode)
            assert _guard() == guard
            assert lf.cuda.get_sync_debug_mode() == back
        with pytest.raises(ValueError, match="debug_mode"):
            lf.cuda.set_sync_debug_mode("loud")
    finally:
        jax.config.update("jax_transfer_guard_device_to_host", prev)


def test_gpu_rng_calls_drive_the_one_generator(gpus):
    lf.manual_seed(3)
    state = lf.cuda.get_rng_state()
    assert lf.cuda.initial_seed() == 3
    a = lf.rand(4)
    lf.cuda.set_rng_state(state)
    assert np.array_equal(np.asarray(a), np.asarray(lf.rand(4)))
    states = lf.cuda.get_rng_state_all()
    assert len(states) == 2 and np.array_equal(np.asarray(states[0]), np.asarray(states[1]))
    b = lf.rand(4)
    lf.cuda.set_rng_state_all(states)
    assert np.array_equal(np.asarray(b), np.asarray(lf.rand(4)))
    lf.cuda.seed()
    assert lf.cuda.initial_seed() != 3  # reseeded from entropy (3 again: 1 in 2**63)
    with pytest.raises(ValueError):
        lf.cuda.get_rng_state("cpu")
    with pytest.raises(lf.ShapeError, match="3-element"):
        lf.cuda.set_rng_state(lf.zeros(5))


def test_gpu_streams_are_one_ordered_queue(gpus):
    _, drained = gpus
    s = lf.cuda.Stream(priority=-1)
    assert s.device == lf.device("cuda:0") and s.priority == -1 and s == lf.cuda.default_stream()
    assert lf.cuda.current_stream() == lf.cuda.default_stream()
    side = lf.cuda.ExternalStream(0xBEEF)
    assert side.cuda_stream == 0xBEEF and side != s
    with lf.cuda.stream(side):
        assert lf.cuda.current_stream() is side
    assert lf.cuda.current_stream() == s
    lf.cuda.set_stream(side)
    assert lf.cuda.current_stream() is side
    assert lf.cuda.get_stream_from_external(7, 1).device == lf.device("cuda:1")
    n = len(drained)
    assert s.query() and s.synchronize() is None and len(drained) == n + 2
    assert not lf.cuda.is_current_stream_capturing()
    with pytest.raises(TypeError, match="Stream"):
        lf.cuda.set_stream("side")  # pyright: ignore[reportArgumentType]


def test_gpu_events_time_the_work_between_records(gpus):
    _, drained = gpus
    start, end = lf.cuda.Event(enable_timing=True), lf.cuda.Event(enable_timing=True)
    with pytest.raises(RuntimeError, match="recorded"):
        start.elapsed_time(end)
    start.record()
    time.sleep(0.05)
    end.record()
    lf.cuda.synchronize()
    assert len(drained) == 3  # each record waited for the queue, as did synchronize
    assert 45 <= start.elapsed_time(end) < 2000 and end.query()
    plain = lf.cuda.Stream().record_event()
    with pytest.raises(RuntimeError, match="enable_timing=True"):
        start.elapsed_time(plain)


def test_gpu_legacy_constructors_build_on_the_gpu(gpus, monkeypatch):
    made = []
    monkeypatch.setattr(lcuda._legacy, "legacy_new", lambda *a: made.append(a) or "t")
    assert lf.cuda.HalfTensor(2, 3) == "t" and lf.cuda.LongTensor([1]) == "t"
    assert [(m[0], m[1], m[2]) for m in made] == [(lf.float16, "cuda", (2, 3)), (lf.int64, "cuda", ([1],))]
    assert not isinstance(lf.zeros(1), lf.cuda.FloatTensor) and isinstance(lf.zeros(1), lf.FloatTensor)
    assert repr(lf.cuda.FloatTensor) == "<class 'lazyflow.cuda.FloatTensor'>"


def test_gpu_device_of_makes_the_tensors_gpu_current(gpus):
    t = types.SimpleNamespace(device=lf.device("cuda:1"))
    with lf.cuda.device_of(t):
        assert lf.cuda.current_device() == 1
    assert lf.cuda.current_device() == 0


def test_gpu_nvml_queries_read_pynvml(gpus, monkeypatch):
    calls = []
    fake = types.SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda i: calls.append(i) or f"h{i}",
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=37, memory=12),
        nvmlDeviceGetTemperature=lambda h, sensor: 61,
        nvmlDeviceGetPowerUsage=lambda h: 250000,
        nvmlDeviceGetClockInfo=lambda h, kind: 1980,
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(used=123),
        nvmlDeviceGetComputeRunningProcesses=lambda h: [types.SimpleNamespace(pid=42, usedGpuMemory=2 << 20)],
    )
    monkeypatch.setitem(__import__("sys").modules, "pynvml", fake)
    assert (lf.cuda.utilization(), lf.cuda.memory_usage(1), lf.cuda.temperature()) == (37, 12, 61)
    assert (lf.cuda.power_draw(), lf.cuda.clock_rate(), lf.cuda.device_memory_used()) == (250000, 1980, 123)
    assert calls == [0, 1, 0, 0, 0, 0]
    assert "process         42 uses        2.000 MB GPU memory" in lf.cuda.list_gpu_processes()
