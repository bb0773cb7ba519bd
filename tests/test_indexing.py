"""``t[idx]`` and ``t[idx] = v`` vs numpy for every index form torch accepts, plus lazyflow's bad-index errors.

Forms: ints (negative too), slices with steps (negative steps follow numpy; torch refuses them), None,
Ellipsis, bool masks, integer tensors/lists/arrays, and mixtures (advanced indices separated by a slice move
to the front, as in numpy and torch).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _harness import MODES, run

import lazyflow as lf

X = np.arange(60, dtype=np.float32).reshape(3, 4, 5)

INDICES = {
    "int": 1,
    "neg_int": -1,
    "two_ints": (2, -3),
    "three_ints": (0, 1, 4),
    "np_int": (np.int64(2),),
    "int_tensor0d": (lf.tensor(1),),
    "slice": slice(1, None),
    "slice_neg_bounds": slice(-2, None),
    "slice_out_of_bounds": slice(-100, 100),
    "empty_slice": slice(2, 1),
    "step": (slice(None), slice(None, None, 2)),
    "step3_offset": (Ellipsis, slice(1, None, 3)),
    "neg_step": slice(None, None, -1),
    "neg_step2": (slice(None, None, -2), 1, slice(None, None, -3)),
    "none": None,
    "none_mid": (slice(None), None, 1),
    "nones": (None, 0, None, Ellipsis, None),
    "ellipsis": Ellipsis,
    "ellipsis_int": (Ellipsis, 2),
    "int_ellipsis_int": (0, Ellipsis, -1),
    "list": [2, 0, 2],
    "list_neg": [-1, 0],
    "nested_list": ([[0, 1], [2, 2]],),
    "array": (slice(None), np.array([3, 0])),
    "tensor": (slice(None), lf.tensor([[1], [2]])),
    "two_lists": ([0, 2], [1, 3]),
    "lists_broadcast": ([[0], [2]], [1, 3]),
    "separated_arrays": ([0, 1], slice(None), [4, 0]),
    "array_and_int": (1, [0, 2], [1, 3]),
    "mask_full": (X > 30,),
    "mask_dim0": (np.array([True, False, True]),),
    "mask_2d": (X[:, :, 0] > 25,),
    "mask_after_int": (0, X[0, :, 0] > 7),
    "mask_list": ([True, False, True],),
    "tensor_mask": (lf.tensor(X[:, :, 0] > 10),),
    "array_none": ([0, 1], None, slice(1, 3)),
}


def _for(lib, idx):
    def conv(i):
        if isinstance(i, lf.Tensor):
            return i if lib == "lf" else np.asarray(i)
        if isinstance(i, np.ndarray) and lib == "lf":
            return lf.tensor(i)
        if isinstance(i, list) and lib == "np":
            return np.asarray(i)
        return i

    return tuple(conv(i) for i in idx) if isinstance(idx, tuple) else conv(idx)


@pytest.mark.parametrize("name", sorted(INDICES))
def test_getitem_matches_numpy(name):
    idx = INDICES[name]
    want = X[_for("np", idx)]
    got = lf.tensor(X)[_for("lf", idx)]
    assert got.shape == want.shape and got.dtype is lf.float32
    np.testing.assert_array_equal(got.numpy(), want)


SETS = [
    "int",
    "neg_int",
    "two_ints",
    "three_ints",
    "slice",
    "step",
    "step3_offset",
    "neg_step2",
    "none_mid",
    "ellipsis_int",
    "list",
    "array",
    "two_lists",
    "separated_arrays",
    "mask_full",
    "mask_dim0",
    "mask_2d",
    "int_tensor0d",
    "empty_slice",
]


@pytest.mark.parametrize("name", SETS)
@pytest.mark.parametrize("value", ["scalar", "broadcast_row", "full"])
def test_setitem_matches_numpy(name, value):
    idx = INDICES[name]
    want = X.copy()
    shape = want[_for("np", idx)].shape
    v = {
        "scalar": -1.5,
        "broadcast_row": -np.arange(1, shape[-1] + 1, dtype=np.float32) if shape else -2.0,
        "full": -np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape),
    }[value]
    want[_for("np", idx)] = v
    t = lf.tensor(X)
    t[_for("lf", idx)] = lf.tensor(v) if isinstance(v, np.ndarray) else v
    np.testing.assert_array_equal(t.numpy(), want)


def test_setitem_casts_value_to_the_tensor_dtype_and_bumps_the_version():
    t = lf.zeros(2, 3, dtype=lf.int32)
    v0 = t._version
    t[0] = 2.7  # torch truncates a float into an int tensor
    t[1, 1:] = lf.tensor([True, False])
    assert t.dtype is lf.int32 and t._version == v0 + 2
    np.testing.assert_array_equal(t.numpy(), [[2, 2, 2], [0, 1, 0]])


def test_setitem_loop_over_a_row_index_compiles_once():
    """``v[i] = x`` for many ``i``: the position is a dynamic operand, not part of the cache key."""
    v = lf.zeros(50, 2)
    rows = [lf.full((2,), float(i)) for i in range(50)]
    v[0] = rows[0]
    before = lf.eager.cache_info()
    for i in range(1, 50):
        v[i] = rows[i]
    after = lf.eager.cache_info()
    assert after.misses == before.misses and after.hits == before.hits + 49
    np.testing.assert_array_equal(v.numpy(), np.repeat(np.arange(50.0)[:, None], 2, 1))


def test_getitem_with_tensor_index_and_gradient():
    x = lf.tensor(X, requires_grad=True)
    y = x[lf.tensor([0, 2, 0]), 1:3, ::2]
    y.backward(lf.ones_like(y))
    want = np.zeros_like(X)
    np.add.at(want, (np.array([0, 2, 0]), slice(1, 3), slice(None, None, 2)), 1.0)
    np.testing.assert_array_equal(x.grad.numpy(), want)


def test_setitem_gradient_flows_to_value_and_unmasked_input():
    x = lf.tensor(X[0], requires_grad=True)
    v = lf.tensor([10.0, 20.0], requires_grad=True)
    y = x * 1.0
    y[1:3, 2] = v
    (y * lf.tensor(np.arange(20.0, dtype=np.float32).reshape(4, 5))).sum().backward()
    g = np.arange(20.0).reshape(4, 5)
    gx = g.copy()
    gx[1:3, 2] = 0
    np.testing.assert_array_equal(x.grad.numpy(), gx)
    np.testing.assert_array_equal(v.grad.numpy(), g[1:3, 2])


@pytest.mark.parametrize("mode", MODES)
def test_indexing_in_graph_mode(mode):
    def f(x, i):
        y = x[1:, None, ::2] * 2
        y[0, 0, 1] = -1.0
        return y, x[i], x[..., -1]

    got = run(mode, f, lf.tensor(X), lf.tensor([2, 0]))
    y = X[1:, None, ::2] * 2
    y[0, 0, 1] = -1.0
    for g, w in zip(got, (y, X[[2, 0]], X[..., -1])):
        np.testing.assert_array_equal(g.numpy(), w)


def test_torch_parity_for_positive_steps_and_advanced_indexing():
    t = torch.tensor(X)
    for name in ("two_lists", "lists_broadcast", "separated_arrays", "array_and_int", "mask_2d", "array_none"):
        idx = INDICES[name]
        ti = tuple(torch.tensor(i) if isinstance(i, (list, np.ndarray)) else i for i in idx)
        np.testing.assert_array_equal(lf.tensor(X)[_for("lf", idx)].numpy(), t[ti].numpy(), err_msg=name)


# ---------------------------------------------------------------- bad indices
BAD = [
    (3, lf.IndexOutOfRangeError, r"index 3 is out of bounds for dimension 0 with size 3"),
    (-4, lf.IndexOutOfRangeError, r"index -4 is out of bounds for dimension 0 with size 3"),
    ((0, 4), lf.IndexOutOfRangeError, r"index 4 is out of bounds for dimension 1 with size 4"),
    ((0, 0, -6), lf.IndexOutOfRangeError, r"dimension 2 with size 5"),
    ((0, 0, 0, 0), lf.IndexOutOfRangeError, r"too many indices for tensor of dimension 3"),
    ([0, 3], lf.IndexOutOfRangeError, r"index 3 is out of bounds for dimension 0 with size 3"),
    ((slice(None), [5]), lf.IndexOutOfRangeError, r"index 5 is out of bounds for dimension 1 with size 4"),
    ((slice(None), lf.tensor([-5])), lf.IndexOutOfRangeError, r"index -5 is out of bounds for dimension 1"),
    ((X[0] > 5,), lf.IndexOutOfRangeError, r"mask .*\[4, 5\].* \[3, 4, 5\]"),
    ((lf.tensor([True, False]),), lf.IndexOutOfRangeError, r"mask .*\[2\].* \[3, 4, 5\]"),
    ((Ellipsis, 0, Ellipsis), IndexError, r"single ellipsis"),
    (1.5, IndexError, r"unsupported index 1.5"),
    ("a", IndexError, r"unsupported index 'a'"),
    ((lf.tensor([0.5]),), IndexError, r"integer or bool"),
]


@pytest.mark.parametrize(("idx", "exc", "match"), BAD, ids=[repr(b[0])[:30] for b in BAD])
def test_bad_index_raises_a_named_error(idx, exc, match):
    with pytest.raises(exc, match=match):
        lf.tensor(X)[idx]
    t = lf.tensor(X)
    with pytest.raises(exc, match=match):
        t[idx] = 0.0
    np.testing.assert_array_equal(t.numpy(), X)  # a refused write changes nothing


def test_index_of_0d_tensor_and_setitem_shape_mismatch():
    with pytest.raises(lf.IndexOutOfRangeError, match="0-dim"):
        lf.tensor(1.0)[0]
    t = lf.zeros(3, 4)
    with pytest.raises(lf.ShapeError, match=r"setitem"):
        t[0] = lf.ones(5)
    np.testing.assert_array_equal(t.numpy(), np.zeros((3, 4)))
