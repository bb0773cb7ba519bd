"""Every known behaviour difference between eager and graph mode, written down as a test (issue 4, section 3).

Each test runs the same user code eagerly and through lf.compile and asserts what differs -- and, where the
modes agree on purpose, that they agree.
"""

import numpy as np
import pytest

import lazyflow as lf
from lazyflow import nn
from lazyflow.nn import functional as F


def test_concrete_values_need_eager_mode():
    x = lf.tensor([1.0, -2.0, 3.0])
    for fn, what in (
        (lambda a: a * a.sum().item(), "item"),
        (lambda a: lf.tensor(a.numpy()), "numpy"),
        (lambda a: a * len(a.tolist()), "tolist"),
        (lambda a: a if a.sum() > 0 else -a, "bool"),
    ):
        fn(x)  # eager: fine
        with pytest.raises(lf.GraphError, match=what):
            lf.compile(fn)(x)


def test_data_dependent_shapes_need_eager_mode():
    x = lf.tensor([1.0, -2.0, 3.0])
    np.testing.assert_array_equal(x[x > 0].numpy(), [1.0, 3.0])
    with pytest.raises(lf.GraphError, match="boolean-mask"):
        lf.compile(lambda a: a[a > 0])(x)
    with pytest.raises(lf.GraphError, match="nonzero"):
        lf.compile(lambda a: lf.nonzero(a))(x)
    # the graph-mode way: a fixed-shape select
    np.testing.assert_array_equal(lf.compile(lambda a: lf.where(a > 0, a, 0.0))(x).numpy(), [1.0, 0.0, 3.0])


def test_out_of_range_indices_raise_in_both_modes_unless_graph_checks_are_off():
    table = lf.arange(12.0).reshape(4, 3)
    idx = lf.tensor([0, 5])
    with pytest.raises(IndexError):
        lf.index_select(table, 0, idx)
    with pytest.raises(IndexError) as eager:
        F.embedding(idx, table)
    f = lf.compile(lambda t, i: F.embedding(i, t))
    with pytest.raises(IndexError) as graph:  # checked after a program of the checks alone
        f(table, idx)
    assert str(graph.value) == str(eager.value)
    # the documented opt-out: no check, XLA's out-of-range gather fills the row with NaN
    lf.graph.set_index_checks(False)
    try:
        out = f(table, idx).numpy()
    finally:
        lf.graph.set_index_checks(True)
    np.testing.assert_array_equal(out[0], [0.0, 1.0, 2.0])
    assert np.isnan(out[1]).all()


def test_writes_to_captured_tensors_need_eager_mode():
    counter = lf.zeros(())

    def count(a):
        counter.add_(1)
        return a * 2

    count(lf.ones(2))
    assert counter.item() == 1
    with pytest.raises(lf.GraphError, match="captured"):
        lf.compile(count)(lf.ones(2))
    assert counter.item() == 1  # nothing half-written


def test_buffers_of_a_compiled_module_are_written_back():
    bn = nn.BatchNorm1d(3)
    ref = nn.BatchNorm1d(3)
    x = lf.randn(8, 3)
    lf.compile(bn)(x)
    ref(x)
    np.testing.assert_allclose(bn.running_mean.numpy(), ref.running_mean.numpy(), rtol=1e-6)
    assert bn.num_batches_tracked.item() == 1 == ref.num_batches_tracked.item()


def test_python_side_effects_run_once_per_trace_not_per_call():
    log = []

    def f(a):
        log.append("called")
        return a + 1

    g = lf.compile(f)
    for _ in range(3):
        g(lf.zeros(2))
    assert log == ["called"]  # eager would log three times
    for _ in range(3):
        f(lf.zeros(2))
    assert len(log) == 4


def test_python_scalar_arguments_are_specialised():
    g = lf.compile(lambda a, k: a * k)
    np.testing.assert_array_equal(g(lf.ones(2), 2.0).numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(g(lf.ones(2), 3.0).numpy(), [3.0, 3.0])
    assert g.cache_info().compiles == 2  # a new Python value is a new program; pass a tensor to avoid it


def test_non_tensor_results_need_eager_mode():
    with pytest.raises(lf.GraphError, match="str"):
        lf.compile(lambda a: "done")(lf.ones(1))


def test_random_draws_agree_between_modes():
    d = nn.Dropout(0.5)
    x = lf.ones(32)
    lf.manual_seed(11)
    eager = d(x).numpy()
    lf.manual_seed(11)
    graph = lf.compile(d)(x).numpy()
    np.testing.assert_array_equal(eager, graph)


def test_errors_point_at_the_users_line():
    def f(a):
        return a * float(a.sum())  # this line is named in the message

    with pytest.raises(lf.GraphError, match=r"test_graph_differences\.py:\d+"):
        lf.compile(f)(lf.ones(2))
