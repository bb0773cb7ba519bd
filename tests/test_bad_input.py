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
    ("int_floordiv_zero", lambda m: m.tensor([5, -6]) // 0, "division by zero"),
    ("int_mod_zero", lambda m: m.tensor([5, -6]) % 0, "division by zero"),
    ("int_floordiv_zero_tensor", lambda m: m.tensor([5, -6]) // m.tensor([1, 0]), "division by zero"),
    ("int_rfloordiv_zero_tensor", lambda m: 7 // m.tensor([0, 1]), "division by zero"),
    ("int_fmod_zero", lambda m: m.fmod(m.tensor([5, -6]), 0), "division by zero"),
    ("int_div_trunc_zero", lambda m: m.div(m.tensor([5]), m.tensor([0]), rounding_mode="trunc"), "division by zero"),
    ("int_div_floor_zero", lambda m: m.div(m.tensor([5]), 0, rounding_mode="floor"), "division by zero"),
    (
        "uint8_int32_remainder_zero",
        lambda m: m.remainder(m.tensor([5], dtype=m.uint8), m.tensor([0])),
        "division by zero",
    ),
    ("int_ifloordiv_zero", lambda m: m.tensor([4, 8]).__ifloordiv__(0), "division by zero"),
    ("broadcast_mismatch", lambda m: m.ones(2) + m.ones(3), "shapes"),
    ("tensor_300_as_uint8", lambda m: m.tensor([300.0], dtype=m.uint8), "uint8"),
    ("full_300_as_uint8", lambda m: m.full((2,), 300, dtype=m.uint8), "uint8"),
    ("fill_300_into_uint8", lambda m: m.zeros(2, dtype=m.uint8).fill_(300), "uint8"),
    ("tensor_inf_as_int32", lambda m: m.tensor([float("inf")], dtype=m.int32), "int32"),
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


# Python numbers into narrow integer dtypes: torch's rule, value by value (an int may wrap into an unsigned type from
# [-max, max]; a float must lie in [min, max] and be finite)
_NARROW_VALUES = [-1, -128, -129, -200, -256, 127, 128, 255, 256, 2**15, 2**31, 1.5, 255.9, 256.0, -1.0, -129.0]
_NARROW_VALUES += [float("inf"), float("nan")]


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32"])
def test_python_numbers_into_narrow_integers_as_torch(name):
    for v in _NARROW_VALUES:
        try:
            want = torch.tensor([v], dtype=getattr(torch, name)).item()
        except RuntimeError:
            with pytest.raises(lf.ValueRangeError, match=name):
                lf.tensor([v], dtype=getattr(lf, name))
            continue
        assert lf.tensor([v], dtype=getattr(lf, name)).item() == want, (name, v)


@pytest.mark.parametrize("op", ["floordiv", "mod", "fmod", "trunc"])
def test_integer_division_with_nonzero_divisors_matches_torch(op):
    a, b = np.array([7, -7, 7, -7, 0, 9]), np.array([2, 2, -2, -2, 3, -4])
    fns = {
        "floordiv": lambda m, x, y: x // y,
        "mod": lambda m, x, y: x % y,
        "fmod": lambda m, x, y: m.fmod(x, y),
        "trunc": lambda m, x, y: m.div(x, y, rounding_mode="trunc"),
    }
    want = fns[op](torch, torch.tensor(a), torch.tensor(b)).numpy()
    np.testing.assert_array_equal(fns[op](lf, lf.tensor(a), lf.tensor(b)).numpy(), want)
    np.testing.assert_array_equal(fns[op](lf, lf.tensor(a), lf.tensor(b)).numpy(), want)  # the cached kernel


def test_refused_inplace_division_leaves_the_target_unchanged():
    t = lf.tensor([4, 8])
    alias = t
    with pytest.raises(lf.DivisionByZeroError):
        t //= lf.tensor([1, 0])
    assert alias.tolist() == [4, 8] and t.tolist() == [4, 8]
    t //= 2  # the refused call donated nothing: the buffer is still usable
    assert t.tolist() == [2, 4]


def test_float_division_by_zero_is_not_refused():
    want = (torch.tensor([5.0, -1.0, 0.0]) // 0).numpy()
    np.testing.assert_array_equal((lf.tensor([5.0, -1.0, 0.0]) // 0).numpy(), want)


def test_out_of_memory_is_a_named_memory_error():
    """torch: RuntimeError "not enough memory: you tried to allocate 40000000000000 bytes"."""
    with pytest.raises(lf.OutOfMemoryError, match="40000000000000 bytes") as info:
        lf.zeros(10**13)
    assert isinstance(info.value, MemoryError) and isinstance(info.value, RuntimeError)
    assert "shape=(10000000000000,)" in str(info.value)
    assert lf.zeros(3).tolist() == [0.0, 0.0, 0.0]  # nothing left broken


@pytest.mark.parametrize("form", ["floordiv", "mod", "fmod", "trunc"])
def test_integer_division_by_zero_raises_in_graph_mode_too(form):
    """Inside lf.compile the divisor is traced: the check is deferred and read back after the program."""
    fns = {
        "floordiv": lambda x, y: x // y,
        "mod": lambda x, y: x % y,
        "fmod": lambda x, y: lf.fmod(x, y),
        "trunc": lambda x, y: lf.div(x, y, rounding_mode="trunc"),
    }
    f = lf.compile(fns[form])
    a, ok, zero = np.array([7, -7, 9]), np.array([2, 3, -4]), np.array([2, 0, 1])
    want = fns[form](torch.tensor(a), torch.tensor(ok)).numpy()
    np.testing.assert_array_equal(f(lf.tensor(a), lf.tensor(ok)).numpy(), want)
    with pytest.raises(RuntimeError):
        fns[form](torch.tensor(a), torch.tensor(zero))
    with pytest.raises(lf.DivisionByZeroError, match="division by zero"):
        f(lf.tensor(a), lf.tensor(zero))
    np.testing.assert_array_equal(f(lf.tensor(a), lf.tensor(ok)).numpy(), want)  # the program is still usable
