"""A donating Graph step's index checks on the host (lazyflow/graph/host_eval.py): the first calls compute the checks'
summary with a generated numpy function while the XLA check program compiles after the step; the numpy function
must agree with that program (XLA is the reference) on every input, including failing ones."""

from __future__ import annotations

import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lazyflow as lf
from lazyflow import nn
from lazyflow.graph import host_eval
from lazyflow.nn import functional as F


class _Net(nn.Module):
    def __init__(self, vocab=10, classes=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, 8)
        self.lin = nn.Linear(8, classes)

    def forward(self, t, sel):
        return self.lin(self.emb(t).tanh())[sel]


class _Step(nn.Graph):
    def __init__(self, model, opt, ignore_index=-100):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)
        self.ignore_index = ignore_index

    def build(self, t, y, sel):
        loss = F.cross_entropy(self.model(t, sel), y, ignore_index=self.ignore_index)
        loss.backward()
        return loss


def _step(ignore_index=-100):
    lf.manual_seed(0)
    m = _Net()
    return _Step(m, lf.optim.SGD(m.parameters(), lr=0.1, momentum=0.9), ignore_index), m


def _the_check(step):
    (v,) = step._program._variants.values()  # internal: the variant's programs
    return v.check


T, Y, SEL = np.array([1, 9, 0, 4, 4, 7]), np.array([0, 4, 2, 1, 3, 3]), np.array([5, 4, 3, 2, 1, 0])


@pytest.mark.parametrize("ignore_index", [-100, 2])
def test_the_numpy_check_equals_the_compiled_check_program(ignore_index):
    # an embedding (token ids in [0, 10)), a loss target (classes [0, 5), one value exempt) and a getitem (rows in
    # [-6, 6)): random inputs, in range and out of it on either side, through both evaluations of the same program
    step, _ = _step(ignore_index)
    step(lf.tensor(T), lf.tensor(Y), lf.tensor(SEL))
    check, inputs = _the_check(step)
    assert isinstance(check, host_eval.HostCheck) and len(inputs) == 3
    compiled = check.make()
    rng = np.random.default_rng(0)
    failing = 0
    for _ in range(300):
        wide = rng.random() < 0.5  # half the draws may leave the ranges, half stay inside
        bounds = ((-2, 12), (-3, 7), (-8, 8)) if wide else ((0, 10), (0, 5), (-6, 6))
        t, y, sel = (rng.integers(lo, hi, 6) for lo, hi in bounds)
        if rng.random() < 0.3:
            y[rng.integers(0, 6)] = ignore_index
        args = [jnp.asarray(a) for a in (t, y, sel)]
        ours, xla = check.check(*args), np.asarray(compiled(*args))
        assert ours.dtype == xla.dtype and ours.tolist() == xla.tolist(), (t, y, sel)
        failing += ours[0] >= 0
    assert 50 < failing < 300  # both outcomes were exercised


def test_the_first_call_checks_on_the_host_and_the_check_program_compiles_after_the_step():
    compiles = []  # (thread name, start, end) of each XLA compile

    def listen(event, duration, **_):
        if event == "/jax/core/compile/backend_compile_duration":
            end = time.monotonic()
            compiles.append((threading.current_thread().name, end - duration, end))

    for t in list(host_eval._pending):  # earlier tests' background compiles: finished before listening
        t.join()
    step, m = _step()
    args = (lf.tensor(T), lf.tensor(Y), lf.tensor(SEL))
    runs = host_eval.stats.host_runs
    jax.monitoring.register_event_duration_secs_listener(listen)
    lf.config.set_compile_cache(False)  # a cache hit from an earlier run would skip the compiles
    try:
        step(*args)
        check, _ = _the_check(step)
        check.thread.join(timeout=60)
    finally:
        lf.config.set_compile_cache(True)
        jax.monitoring.unregister_event_duration_listener(listen)
    assert host_eval.stats.host_runs == runs + 1  # the first call: numpy
    background = [c for c in compiles if c[0] == "lazyflow-check-compile-later"]
    main = [c for c in compiles if c[0] != "lazyflow-check-compile-later"]
    assert len(background) == 1 and main, compiles
    assert background[0][1] >= max(end for *_, end in main)  # after the step's compile, not beside it
    assert check.compiled is not None
    step(*args)
    assert host_eval.stats.host_runs == runs + 1  # later calls: the compiled program


def test_a_bad_index_on_the_first_call_raises_before_anything_changes():
    step, m = _step()
    before = {k: np.asarray(v.jax()).copy() for k, v in m.state_dict().items()}
    with pytest.raises(lf.IndexOutOfRangeError, match="target: index 5 is out of range"):
        step(lf.tensor(T), lf.tensor(np.array([0, 4, 5, 1, 3, 3])), lf.tensor(SEL))
    assert isinstance(_the_check(step)[0], host_eval.HostCheck)
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(np.asarray(v.jax()), before[k], err_msg=k)


def test_a_numpy_error_hands_the_call_to_the_compiled_program():
    def broken(*xs):
        raise ValueError("zero-size array to reduction operation")

    compiled = jax.jit(lambda x: jnp.stack([jnp.min(x), jnp.max(x)]))
    check = host_eval.HostCheck(broken, lambda: compiled)
    fallbacks = host_eval.stats.fallbacks
    x = jnp.asarray(np.array([3, -1, 7]))
    assert np.asarray(check(x)).tolist() == [-1, 7]
    assert check.compiled is compiled and host_eval.stats.fallbacks == fallbacks + 1
    assert np.asarray(check(x)).tolist() == [-1, 7]  # stays with the compiled program
    assert host_eval.stats.fallbacks == fallbacks + 1


def test_integer_arithmetic_wraps_and_converts_as_xla_does():
    # int32 overflow, narrowing conversions, clamped dynamic slices, select and argmin: numpy against XLA
    def f(x, i):
        big = x * jnp.int32(1 << 30) + jnp.int32(1 << 30)  # wraps
        narrow = (x.astype(jnp.int64) * (1 << 20) + x).astype(jnp.int8)  # truncates
        sl = jax.lax.dynamic_slice(x, (i,), (3,))  # start clamped into range
        return jnp.stack(
            [
                jnp.min(big),
                jnp.max(narrow.astype(jnp.int32)),
                jnp.sum(sl),
                jnp.argmin(jnp.where(x > 2, x, 100)).astype(jnp.int32),
                jnp.any(x == 7).astype(jnp.int32),
            ]
        )

    rng = np.random.default_rng(1)
    for _ in range(50):
        x = rng.integers(-50, 50, 8).astype(np.int32)
        i = np.int32(rng.integers(-5, 12))
        closed = jax.make_jaxpr(f)(x, i)
        check = host_eval.host_checker(closed, lambda: None)
        assert check is not None
        assert check.check(x, i).tolist() == np.asarray(jax.jit(f)(x, i)).tolist(), (x, i)


def test_float_values_and_large_inputs_keep_the_compiled_program():
    ints = jax.make_jaxpr(lambda x: jnp.stack([jnp.min(x), jnp.max(x)]))(np.zeros(8, np.int32))
    assert host_eval.host_checker(ints, lambda: None) is not None
    floats = jax.make_jaxpr(lambda x: jnp.argmax(x))(np.zeros(8, np.float32))  # NaN ordering: XLA's own
    assert host_eval.host_checker(floats, lambda: None) is None
    large = jax.make_jaxpr(lambda x: jnp.stack([jnp.min(x), jnp.max(x)]))(
        np.zeros(host_eval.MAX_ELEMENTS + 1, np.int32)
    )
    assert host_eval.host_checker(large, lambda: None) is None
    dot = jax.make_jaxpr(lambda a, b: jnp.argmax(a @ b))(np.zeros((2, 2), np.int32), np.zeros((2, 2), np.int32))
    assert host_eval.host_checker(dot, lambda: None) is None  # a primitive outside the list
