"""``lf.testing`` against ``torch.testing``: the same calls pass or fail alike, with the same exception class and
message (``torch.`` read as ``lazyflow.``); ``make_tensor``'s shapes, dtypes, ranges and errors as torch's."""

import math
import warnings

import numpy as np
import pytest
import torch

import lazyflow as lf

NAN, INF = float("nan"), float("inf")


def T(lib, values, dtype="float32", **kw):
    return lib.tensor(values, dtype=getattr(lib, dtype), **kw)


CASES = {  # name -> f(lib) returning (actual, expected, kwargs)
    "equal": lambda m: (T(m, [1.0, 2.0]), T(m, [1.0, 2.0]), {}),
    "close_float32": lambda m: (T(m, [1.0, 2.0, 3.0]), T(m, [1.0, 2.1, 3.0]), {}),
    "two_by_two": lambda m: (T(m, [[1.0, 2.0], [3.0, 4.0]]), T(m, [[1.0, 2.0], [3.0, 5.0]]), {}),
    "several_mismatches": lambda m: (T(m, [1.0, 2.0, 3.0]), T(m, [1.0, 4.0, 3.5]), {}),
    "shape": lambda m: (T(m, [1.0, 2.0]), T(m, [1.0, 2.0, 3.0]), {}),
    "dtype": lambda m: (T(m, [1.0, 2.0]), T(m, [1.0, 2.0], "float64"), {}),
    "dtype_unchecked": lambda m: (T(m, [1.0, 2.0]), T(m, [1.0, 2.0], "float64"), {"check_dtype": False}),
    "promoted_half": lambda m: (T(m, [1.0, 2.0], "float16"), T(m, [1.0, 2.01]), {"check_dtype": False}),
    "float16": lambda m: (T(m, [1.0, 2.0], "float16"), T(m, [1.0, 2.001], "float16"), {}),
    "bfloat16": lambda m: (T(m, [1.0, 2.0], "bfloat16"), T(m, [1.0, 2.1], "bfloat16"), {}),
    "float64_tight": lambda m: (T(m, [1.0, 2.0], "float64"), T(m, [1.0, 2.0000001], "float64"), {}),
    "nan": lambda m: (T(m, [NAN]), T(m, [NAN]), {}),
    "nan_equal": lambda m: (T(m, [NAN]), T(m, [NAN]), {"equal_nan": True}),
    "nan_equal_other_mismatch": lambda m: (T(m, [1.0, NAN]), T(m, [1.5, NAN]), {"equal_nan": True}),
    "inf_same": lambda m: (T(m, [1.0, INF]), T(m, [1.0, INF]), {}),
    "inf_opposite": lambda m: (T(m, [1.0, INF]), T(m, [1.0, -INF]), {}),
    "zero_expected": lambda m: (T(m, [1.0]), T(m, [0.0]), {}),
    "within_atol": lambda m: (T(m, [0.0]), T(m, [1e-6]), {}),
    "ints": lambda m: (T(m, [1, 2], "int64"), T(m, [1, 3], "int64"), {}),
    "int_dtypes": lambda m: (T(m, [1, 2], "int64"), T(m, [1, 2], "int32"), {}),
    "bools": lambda m: (T(m, [True, False], "bool"), T(m, [True, True], "bool"), {}),
    "complex": lambda m: (T(m, [1 + 1j], "complex64"), T(m, [1 + 2j], "complex64"), {}),
    "zero_d": lambda m: (T(m, 1.0), T(m, 2.0), {}),
    "empty": lambda m: (m.zeros(0), m.zeros(0), {}),
    "custom_tolerances": lambda m: (T(m, [1.0, 1.0]), T(m, [1.01, 1.01]), {"rtol": 0.1, "atol": 0.0}),
    "only_rtol": lambda m: (T(m, [1.0]), T(m, [1.0]), {"rtol": 1e-3}),
    "only_atol": lambda m: (T(m, [1.0]), T(m, [1.0]), {"atol": 1e-3}),
    "msg_string": lambda m: (T(m, [1.0]), T(m, [0.0]), {"msg": "custom message"}),
    "msg_callable": lambda m: (T(m, [1.0, 1.0]), T(m, [1.5, 1.5]), {"msg": lambda s: "wrapped: " + s}),
    "requires_grad_ignored": lambda m: (T(m, [1.0, 2.0]), T(m, [1.0, 2.0]).requires_grad_(), {}),
    "scalars_float": lambda m: (1.0, 1.5, {}),
    "scalars_close": lambda m: (1.0, 1.0 + 1e-9, {}),
    "scalars_int": lambda m: (1, 2, {}),
    "scalars_int_float": lambda m: (1, 1.0, {}),
    "scalars_int_float_unchecked": lambda m: (1, 1.0, {"check_dtype": False}),
    "scalars_bool": lambda m: (True, False, {}),
    "scalars_complex": lambda m: (1 + 1j, 1 + 2j, {}),
    "none": lambda m: (None, None, {}),
    "strings": lambda m: ("a", "a", {}),
    "nested": lambda m: ([m.ones(2), {"a": m.ones(1)}], [m.ones(2), {"a": m.zeros(1)}], {}),
    "tuple_vs_list": lambda m: ((m.ones(1),), [m.ones(1)], {}),
    "lengths": lambda m: ([1.0, 2.0], [1.0], {}),
    "keys": lambda m: ({"a": 1.0}, {"b": 1.0}, {}),
    "tensor_vs_list": lambda m: (m.ones(2), [1.0, 1.0], {}),
    "tensor_vs_numpy": lambda m: (m.ones(2), np.ones(2, np.float32), {}),
    "numpy_pair": lambda m: (np.array([1.0, 2.0]), np.array([1.0, 2.5]), {}),
}


def _outcome(lib, case):
    actual, expected, kw = CASES[case](lib)
    try:
        lib.testing.assert_close(actual, expected, **kw)
    except Exception as e:
        return type(e).__name__, str(e).replace("torch.", "lazyflow.").replace("<class 'lazyflow.Tensor'>", "TENSOR")
    return "ok", ""


@pytest.mark.parametrize("case", sorted(CASES))
def test_assert_close_passes_and_fails_as_torchs_with_its_message(case):
    theirs = _outcome(torch, case)
    ours = _outcome(lf, case)
    ours = (ours[0], ours[1].replace("<class 'lazyflow._tensor.Tensor'>", "TENSOR"))
    assert ours == theirs


def test_assert_allclose_is_deprecated_and_lenient_like_torchs():
    for lib in (lf, torch):
        with pytest.warns(FutureWarning):
            lib.testing.assert_allclose(T(lib, [1.0, NAN]), [1.0, NAN])  # lists become tensors; NaNs equal
        with pytest.warns(FutureWarning), pytest.raises(AssertionError):
            lib.testing.assert_allclose(T(lib, [1.0]), [2.0])


@pytest.mark.parametrize(
    "dtype", ["float32", "float64", "float16", "bfloat16", "complex64", "int64", "int8", "uint8", "bool"]
)
def test_make_tensor_shape_dtype_and_range_as_torchs(dtype):
    lf.manual_seed(0)
    ours = lf.testing.make_tensor(3, 50, dtype=getattr(lf, dtype), device="cpu")
    theirs = torch.testing.make_tensor(3, 50, dtype=getattr(torch, dtype), device="cpu")
    assert tuple(ours.shape) == tuple(theirs.shape) == (3, 50) and str(ours.dtype).split(".")[1] == dtype
    lo, hi = {"bool": (0, 1), "uint8": (0, 9), "int64": (-9, 9), "int8": (-9, 9)}.get(dtype, (-9, 9))
    vals = ours.numpy()
    parts = [vals.real, vals.imag] if np.iscomplexobj(vals) else [vals]
    for p in parts:
        p = p.astype(np.float64)
        assert p.min() >= lo and p.max() <= hi and len(np.unique(p)) > 1  # drawn, not filled
        if dtype not in ("bool", "uint8", "int64", "int8"):
            assert p.max() < hi  # the upper bound is exclusive
    lf.manual_seed(0)
    again = lf.testing.make_tensor((3, 50), dtype=getattr(lf, dtype))
    np.testing.assert_array_equal(again.numpy(), vals)  # the global generator: repeatable


def test_make_tensor_bounds_exclude_zero_and_grad_as_torchs():
    for lib in (lf, torch):
        t = lib.testing.make_tensor(1000, dtype=lib.float32, device="cpu", low=-0.5, high=0.5, requires_grad=True)
        assert t.requires_grad and float(t.min()) >= -0.5 and float(t.max()) < 0.5
        i = lib.testing.make_tensor(1000, dtype=lib.int64, device="cpu", low=0, high=2, exclude_zero=True)
        assert set(np.unique(i.numpy()).tolist()) == {1}
        b = lib.testing.make_tensor(100, dtype=lib.int8, device="cpu", low=-1000, high=1000)  # clamped to int8
        assert int(b.min()) >= -128 and int(b.max()) <= 127
        z = lib.testing.make_tensor(100, dtype=lib.float32, device="cpu", low=0, high=1e-45, exclude_zero=True)
        assert float(z.min()) > 0
        with pytest.raises(ValueError, match="`low` must be less than `high`"):
            lib.testing.make_tensor(2, dtype=lib.int64, device="cpu", low=5, high=1)
        with pytest.raises(ValueError, match="cannot be NaN"):
            lib.testing.make_tensor(2, dtype=lib.float32, device="cpu", low=math.nan)
        with pytest.raises(ValueError, match="only supports"):
            lib.testing.make_tensor(2, dtype=lib.uint8, device="cpu", low=-20, high=-10)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(FutureWarning):
                lib.testing.make_tensor(2, dtype=lib.float32, device="cpu", low=1.0, high=1.0)
    with pytest.raises(lf.DTypeError):
        lf.testing.make_tensor(2, dtype="float32")
