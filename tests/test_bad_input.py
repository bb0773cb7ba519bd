"""Bad input raises a named lazyflow error that subclasses the built-in exception torch raises for the same call,
with a message naming what was expected and what arrived -- never a raw JAX/numpy error or a silently wrong value."""

import numpy as np
import pytest
import torch

import lazyflow as lf

INF = float("inf")

# (id, lazyflow call, torch call, a word the lazyflow message must contain)
CASES = [
    ("zeros_float_size", lambda m: m.zeros(2.5), "float"),
    ("zeros_str_size", lambda m: m.zeros("3"), "str"),
    ("ones_float_in_tuple", lambda m: m.ones((2, 1.5)), "pos 1"),
    ("linear_str_features", lambda m: m.nn.Linear("abc", 3), "str"),
    ("embedding_float_count", lambda m: m.nn.Embedding(2.5, 3), "float"),
    ("tensor_int_beyond_int64", lambda m: m.tensor([2**63]), "int64"),
    ("tensor_int_below_int64", lambda m: m.tensor([-(2**63) - 1]), "int64"),
    ("scalar_int_beyond_int64", lambda m: m.tensor(2**64), "int64"),
    ("add_none", lambda m: m.ones(3) + None, "NoneType"),
    ("radd_none", lambda m: None + m.ones(3), "NoneType"),
    ("mul_str", lambda m: m.ones(3) * "a", "str"),
    ("arange_to_inf", lambda m: m.arange(0, INF), "finite"),
    ("arange_nan_step", lambda m: m.arange(0, 1, float("nan")), "finite"),
]


def _torch_error(fn):
    with pytest.raises(Exception) as info:
        fn(torch)
    return info.value


@pytest.mark.parametrize("fn,word", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_same_builtin_exception_as_torch(fn, word):
    torch_err = _torch_error(fn)
    builtin = next(c for c in type(torch_err).__mro__ if c.__module__ == "builtins")
    with pytest.raises(lf.LazyflowError) as info:
        fn(lf)
    assert isinstance(info.value, builtin), (type(info.value).__mro__, type(torch_err).__mro__)
    assert word in str(info.value)


def test_integer_sizes_of_every_kind_are_accepted_like_torch():
    assert lf.zeros(np.int64(3)).shape == tuple(torch.zeros(np.int64(3)).shape)
    assert lf.zeros((np.int32(2), 3)).shape == tuple(torch.zeros((np.int32(2), 3)).shape)
    assert lf.zeros(lf.tensor(3)).shape == tuple(torch.zeros(torch.tensor(3)).shape)


def test_int64_bounds_are_kept_exactly():
    t = lf.tensor([2**63 - 1, -(2**63)])
    assert t.tolist() == [2**63 - 1, -(2**63)]


def test_negative_size_is_a_shape_error_naming_it():
    with pytest.raises(lf.ShapeError, match="-1"):
        lf.zeros(3, -1)
