"""``lf.testing``: torch.testing's ``assert_close``, ``make_tensor`` and the deprecated ``assert_allclose``, with
torch's rules and messages, so a test file written for torch runs with its import changed.

``assert_close(actual, expected)`` compares tensors (and numpy arrays with each other), Python scalars, and
sequences and mappings of them, recursively. Tensors must agree in shape, and unless switched off in device and
dtype; values are close where ``|actual - expected| <= atol + rtol * |expected|`` (equal infinities are close, NaN
only with ``equal_nan``), with torch's default tolerances per dtype (the looser of the two inputs'):

=====================  ========  ========
dtype                  rtol      atol
=====================  ========  ========
float16                1e-3      1e-5
bfloat16               1.6e-2    1e-5
float32 / complex64    1.3e-6    1e-5
float64 / complex128   1e-7      1e-7
integers, bool         0         0
=====================  ========  ========
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ._core import config as _config
from ._core import dtypes as D
from ._core.errors import ArgumentError, DTypeError
from ._core.finfo import finfo, iinfo
from ._creation import rand, randint, tensor
from ._tensor import Tensor

__all__ = ["assert_close", "assert_allclose", "make_tensor"]

_PRECISIONS = {
    D.float16: (1e-3, 1e-5),
    D.bfloat16: (0.016, 1e-5),
    D.float32: (1.3e-6, 1e-5),
    D.float64: (1e-7, 1e-7),
    D.complex64: (1.3e-6, 1e-5),
    D.complex128: (1e-7, 1e-7),
}
_SCALAR_PRECISIONS = {float: _PRECISIONS[D.float64], complex: _PRECISIONS[D.complex128]}


class _Mismatch(Exception):
    """A failed comparison: the class to raise and torch's message (before the path of the failing item)."""

    def __init__(self, cls: type[Exception], text: str) -> None:
        super().__init__(text)
        self.cls, self.text = cls, text


def _tolerances(dtypes, rtol, atol) -> tuple[float, float]:
    if (rtol is None) != (atol is None):
        missing = "rtol" if rtol is None else "atol"
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got no {missing}.")
    if rtol is not None:
        return float(rtol), float(atol)
    pairs = [_PRECISIONS.get(d, (0.0, 0.0)) for d in dtypes]
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


def _diff_lines(equality: bool, abs_diff, abs_idx, atol, rel_diff, rel_idx, rtol) -> str:
    out = []
    for kind, diff, idx, tol in (("absolute", abs_diff, abs_idx, atol), ("relative", rel_diff, rel_idx, rtol)):
        line = (
            f"{kind.title()} difference: {diff}"
            if idx is None
            else f"Greatest {kind} difference: {diff} at index {idx}"
        )
        out.append(line if equality else f"{line} (up to {tol} allowed)")
    return "\n".join(out)


def _scalar_message(actual, expected, rtol: float, atol: float) -> str:
    equality = rtol == 0 and atol == 0
    abs_diff = abs(actual - expected)
    rel_diff = math.inf if expected == 0 else abs_diff / abs(expected)
    head = f"Scalars are not {'equal' if equality else 'close'}!\n\nExpected {expected} but got {actual}.\n"
    return head + _diff_lines(equality, abs_diff, None, atol, rel_diff, None, rtol)


def _isclose(a: np.ndarray, e: np.ndarray, rtol: float, atol: float, equal_nan: bool) -> np.ndarray:
    if a.dtype.kind in "biu":
        return a == e
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    return np.isclose(a.astype(wide), e.astype(wide), rtol=rtol, atol=atol, equal_nan=equal_nan)


def _tensor_message(a: np.ndarray, e: np.ndarray, matches: np.ndarray, rtol: float, atol: float) -> str:
    n, bad = matches.size, int(matches.size - matches.sum())
    head = f"Mismatched elements: {bad} / {n} ({bad / n:.1%})"
    af, ef, mf = a.reshape(-1), e.reshape(-1), matches.reshape(-1)
    if af.dtype.kind in "biu":  # exact types: differences in int64, the relative one in the default float dtype
        af, ef = af.astype(np.int64), ef.astype(np.int64)
        abs_diff = np.abs(af - ef)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel_diff = abs_diff.astype(np.float32) / np.abs(ef).astype(np.float32)
    else:
        abs_diff = np.abs(af - ef)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel_diff = abs_diff / np.abs(ef)
    abs_diff[mf], rel_diff[mf] = 0, 0  # the greatest differences among the mismatches only
    ia, ir = int(np.argmax(abs_diff)), int(np.argmax(rel_diff))  # the first NaN wins, as torch.max's
    equality = rtol == 0 and atol == 0
    index = lambda i: tuple(int(k) for k in np.unravel_index(i, matches.shape))
    lines = _diff_lines(equality, abs_diff[ia].item(), index(ia), atol, rel_diff[ir].item(), index(ir), rtol)
    return f"Tensor-likes are not {'equal' if equality else 'close'}!\n\n{head}\n{lines}"


def _host(x) -> tuple[np.ndarray, D.DType, Any]:
    if isinstance(x, Tensor):
        return np.asarray(x.detach().numpy()), x.dtype, x.device
    arr = np.asarray(x)
    return arr, D.from_jax_dtype(arr.dtype), "cpu"


def _compare_tensors(actual, expected, *, rtol, atol, equal_nan, check_device, check_dtype) -> None:
    a, da, deva = _host(actual)
    e, de, deve = _host(expected)
    if a.shape != e.shape:
        sa, se = (x.shape if isinstance(x, Tensor) else a.shape for x in (actual, expected))
        raise _Mismatch(AssertionError, f"The values for attribute 'shape' do not match: {sa} != {se}.")
    if check_device and isinstance(actual, Tensor) and deva != deve:
        raise _Mismatch(AssertionError, f"The values for attribute 'device' do not match: {deva} != {deve}.")
    if check_dtype and da is not de:
        raise _Mismatch(AssertionError, f"The values for attribute 'dtype' do not match: {da} != {de}.")
    rtol, atol = _tolerances((da, de), rtol, atol)
    if da is not de:  # compared in the promoted dtype, as torch does with check_dtype=False
        common = D.promote_types(da, de)
        a, e = a.astype(common.np), e.astype(common.np)
    matches = _isclose(a, e, rtol, atol, equal_nan)
    if matches.all():
        return
    if a.ndim == 0:
        raise _Mismatch(AssertionError, _scalar_message(a.item(), e.item(), rtol, atol))
    raise _Mismatch(AssertionError, _tensor_message(a, e, matches, rtol, atol))


def _compare_scalars(actual, expected, *, rtol, atol, equal_nan, check_dtype) -> None:
    if isinstance(actual, bool) and isinstance(expected, bool):
        if actual is not expected:
            raise _Mismatch(AssertionError, f"Booleans mismatch: {actual} is not {expected}")
        return
    if check_dtype and type(actual) is not type(expected):
        raise _Mismatch(AssertionError, f"The (d)types do not match: {type(actual)} != {type(expected)}.")
    kinds = [complex if isinstance(v, complex) else float if isinstance(v, float) else int for v in (actual, expected)]
    if (rtol is None) != (atol is None):
        _tolerances((), rtol, atol)  # raises torch's ValueError
    if rtol is None:
        pairs = [_SCALAR_PRECISIONS.get(k, (0.0, 0.0)) for k in kinds]
        rtol, atol = max(p[0] for p in pairs), max(p[1] for p in pairs)
    if actual == expected or (equal_nan and _isnan(actual) and _isnan(expected)):
        return
    if abs(actual - expected) <= atol + rtol * abs(expected):
        return
    raise _Mismatch(AssertionError, _scalar_message(actual, expected, float(rtol), float(atol)))


def _isnan(v) -> bool:
    return isinstance(v, (float, complex)) and v != v


def _is_number(v) -> bool:
    return isinstance(v, numbers.Number) and not isinstance(v, (np.ndarray, np.generic))


def _walk(actual, expected, path: str, opts: dict) -> None:
    tensor_like = (Tensor, np.ndarray, np.generic)
    if isinstance(actual, tensor_like) and isinstance(expected, tensor_like):
        if isinstance(actual, Tensor) != isinstance(expected, Tensor):
            raise TypeError(
                f"No comparison pair was able to handle inputs of type {type(actual)} and {type(expected)}."
            )
        return _at(path, _compare_tensors, actual, expected, **opts)
    if _is_number(actual) and _is_number(expected):
        opts = {k: v for k, v in opts.items() if k != "check_device"}
        return _at(path, _compare_scalars, actual, expected, **opts)
    if actual is None and expected is None:
        return None
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        ka, ke = set(actual), set(expected)
        if ka != ke:
            raise _Mismatch(
                AssertionError,
                "The keys of the mappings do not match:\n"
                f"Missing keys in the actual mapping: {sorted(ke - ka, key=repr)}\n"
                f"Additional keys in the actual mapping: {sorted(ka - ke, key=repr)}" + _where(path),
            )
        for k in expected:
            _walk(actual[k], expected[k], f"{path}[{k!r}]", opts)
        return None
    if (
        isinstance(actual, Sequence)
        and isinstance(expected, Sequence)
        and _is_sequence(actual)
        and _is_sequence(expected)
    ):
        if len(actual) != len(expected):
            raise _Mismatch(
                AssertionError, f"The length of the sequences mismatch: {len(actual)} != {len(expected)}" + _where(path)
            )
        for i, (a, e) in enumerate(zip(actual, expected)):
            _walk(a, e, f"{path}[{i}]", opts)
        return None
    raise TypeError(f"No comparison pair was able to handle inputs of type {type(actual)} and {type(expected)}.")


def _is_sequence(v) -> bool:
    return isinstance(v, Sequence) and not isinstance(v, (str, bytes, bytearray))


def _where(path: str) -> str:
    return f"\n\nThe failure occurred for item {path}" if path else ""


def _at(path: str, fn, *args, **kwargs) -> None:
    try:
        fn(*args, **kwargs)
    except _Mismatch as m:
        raise _Mismatch(m.cls, m.text + _where(path)) from None


def assert_close(
    actual: Any,
    expected: Any,
    *,
    allow_subclasses: bool = True,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = False,
    check_device: bool = True,
    check_dtype: bool = True,
    check_layout: bool = True,
    check_stride: bool = False,
    msg: str | Callable[[str], str] | None = None,
) -> None:
    """Raise ``AssertionError`` unless ``actual`` and ``expected`` are close (torch.testing.assert_close).

    Args:
        actual, expected: tensors (or numpy arrays, compared with each other), Python scalars, or sequences and
            mappings of them (compared item by item; the message names the failing item).
        rtol, atol: tolerances; both or neither (default: the table in the module docstring).
        equal_nan: NaNs at the same place count as equal.
        check_device, check_dtype: require the same device / dtype (otherwise both are promoted and compared).
        check_layout, check_stride: accepted as torch's (lazyflow's tensors are dense and have no strides).
        allow_subclasses: accepted (a Parameter compares as a Tensor).
        msg: a message replacing torch's, or a callable receiving torch's message and returning the one to raise.

    Raises:
        AssertionError: the inputs differ (shape, device, dtype, keys, lengths or values), with torch's message.
        TypeError: inputs of types that cannot be compared (a Tensor with a list, a Tensor with a numpy array).
        ValueError: only one of ``rtol`` and ``atol``.
    """
    opts = dict(rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=check_device, check_dtype=check_dtype)
    if (rtol is None) != (atol is None):
        _tolerances((), rtol, atol)
    try:
        _walk(actual, expected, "", opts)
    except _Mismatch as m:
        text = m.text if msg is None else msg(m.text) if callable(msg) else msg
        raise m.cls(text) from None


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan: bool = True, msg: str = "") -> None:
    """torch's deprecated ``assert_allclose``: :func:`assert_close` without device and dtype checks, NaNs equal,
    non-tensor inputs turned into tensors first. Prefer ``assert_close``."""
    warnings.warn(
        "`lf.testing.assert_allclose()` is deprecated (as torch's) and will be removed. Use "
        "`lf.testing.assert_close()` instead.",
        FutureWarning,
        stacklevel=2,
    )
    if not isinstance(actual, Tensor):
        actual = tensor(actual)
    if not isinstance(expected, Tensor):
        expected = tensor(expected, dtype=actual.dtype)
    assert_close(
        actual,
        expected,
        rtol=rtol,
        atol=atol,
        equal_nan=equal_nan,
        check_device=False,
        check_dtype=False,
        msg=msg or None,
    )


def _bounds(low, high, lo_ok: float, hi_ok: float, default: tuple[float, float], dtype: D.DType, integral: bool):
    low = default[0] if low is None else low
    high = default[1] if high is None else high
    if any(isinstance(v, float) and math.isnan(v) for v in (low, high)):
        raise ValueError(f"`low` and `high` cannot be NaN, but got low={low} and high={high}")
    if low == high and not integral:
        warnings.warn(
            "Passing `low==high` to `lf.testing.make_tensor` for floating or complex types is deprecated (as in "
            "torch); use `lf.full(...)` instead.",
            FutureWarning,
            stacklevel=3,
        )
    elif low >= high:
        raise ValueError(f"`low` must be less than `high`, but got {low} >= {high}")
    elif high < lo_ok or low >= hi_ok:
        raise ValueError(
            f"The value interval specified by `low` and `high` is [{low}, {high}), but {dtype} only supports "
            f"[{lo_ok}, {hi_ok})"
        )
    low, high = min(max(low, lo_ok), hi_ok), min(max(high, lo_ok), hi_ok)
    return (math.ceil(low), math.ceil(high)) if integral else (float(low), float(high))


def make_tensor(
    *shape,
    dtype: D.DType,
    device=None,
    low: float | None = None,
    high: float | None = None,
    requires_grad: bool = False,
    noncontiguous: bool = False,
    exclude_zero: bool = False,
    memory_format=None,
) -> Tensor:
    """A tensor of ``shape`` with values drawn uniformly from ``[low, high)`` (torch.testing.make_tensor): by
    default ``[0, 2)`` for bool, ``[0, 10)`` for uint8, ``[-9, 10)`` for signed integers, ``[-9, 9)`` for floating
    and (each part of) complex dtypes; bounds outside the dtype's finite range are clamped to it. Draws come from
    lazyflow's global generator (``lf.manual_seed`` makes them repeatable). ``exclude_zero`` replaces zeros by 1
    (bool, integers) or the dtype's smallest normal number (``finfo.tiny``; complex: ``tiny + tiny j``).
    ``noncontiguous`` and ``memory_format`` are accepted as torch's and change no value (lazyflow has no strides).

    Raises:
        ValueError: ``low >= high`` (equal is allowed, with torch's deprecation warning, for floating types), a NaN
            bound, or an interval the dtype cannot hold.
        DTypeError: ``dtype`` is not a lazyflow dtype.
    """
    if len(shape) == 1 and isinstance(shape[0], Sequence):
        shape = tuple(shape[0])
    if not isinstance(dtype, D.DType):
        raise DTypeError(f"make_tensor(): dtype must be a lazyflow dtype (lf.float32...), got {dtype!r}")
    if noncontiguous and memory_format is not None:
        raise ArgumentError("make_tensor(): noncontiguous and memory_format are mutually exclusive (as in torch)")
    if dtype is D.bool_ or not dtype.is_inexact:
        if dtype is D.bool_:
            lo, hi = _bounds(low, high, 0, 2, (0, 2), dtype, True)
        else:
            info = iinfo(dtype)
            lo, hi = _bounds(low, high, info.min, info.max + (dtype is not D.int64), (-9, 10), dtype, True)
        out = randint(int(lo), int(hi), tuple(shape), dtype=D.int64 if dtype is D.bool_ else dtype, device=device)
        out = out.to(dtype) if dtype is D.bool_ else out
        if exclude_zero:
            out = out.masked_fill(out == 0, 1)
        return out
    info = finfo(dtype)
    lo, hi = _bounds(low, high, info.min, info.max, (-9, 9), dtype, False)
    real = D.to_real(dtype)
    # uniform on [lo, hi) drawn wide (hi - lo may overflow a narrow dtype), then rounded to the dtype
    wide = D.float64 if _config.x64_enabled() else D.float32
    parts = [
        rand(tuple(shape), dtype=wide, device=device) * (hi - lo) + lo for _ in range(2 if dtype.is_complex else 1)
    ]
    parts = [p.to(real) for p in parts]
    out = parts[0] if len(parts) == 1 else (parts[0] + 1j * parts[1].to(dtype)).to(dtype)
    if exclude_zero:
        tiny = info.tiny
        out = out.masked_fill(out == 0, complex(tiny, tiny) if dtype.is_complex else tiny)
    return out.requires_grad_(requires_grad)
