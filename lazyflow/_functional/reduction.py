"""Reductions with torch's signatures: sum/mean/prod, max/min/argmax, var/std, norms, logical and
cumulative reductions, softmax/log_softmax."""

from __future__ import annotations

import builtins
import math

import numpy as np

from .._core import dtypes as D
from .._core.context import state
from .._core.errors import DTypeError, IndexOutOfRangeError, OpError
from .._tensor import Tensor, _dim
from ..ops.table import REGISTRY as R
from ._common import _apply, _dims, _MinMax
from .elementwise import maximum, minimum, ne
from .shape import _on_scalar

__all__ = [
    "all",
    "amax",
    "amin",
    "any",
    "argmax",
    "argmin",
    "cumprod",
    "cumsum",
    "log_softmax",
    "logsumexp",
    "max",
    "mean",
    "min",
    "norm",
    "prod",
    "softmax",
    "std",
    "std_mean",
    "sum",
    "var",
    "var_mean",
]


# ---------------------------------------------------------------- reductions
def _opt_dtype(dtype):
    return None if dtype is None else D.to_dtype(dtype)


def _reduce(name, input, dim, keepdim, *extra):
    return _apply(R[name], (input,), (_dims(dim, input.ndim), builtins.bool(keepdim), *extra))


def sum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Sum of elements over ``dim``.

    Args:
        input: the tensor.
        dim: an int or a tuple of ints; None (or ``()``) reduces every dimension.
        keepdim: keep reduced dimensions with size 1.
        dtype: accumulate and return in this dtype.
    Returns:
        The sum; integer and bool inputs sum to int64 like torch.
    Raises:
        IndexOutOfRangeError: a dim outside ``[-ndim, ndim)``.
    >>> lf.tensor([[1, 2], [3, 4]]).sum(1)
    tensor([3, 7])
    """
    if dim is None and keepdim is False and dtype is None:  # hot path: the full reduction
        return state.interp.apply(_SUM, (input,), _SUM_ALL)
    return _apply(_SUM, (input,), (_dims(dim, input.ndim), builtins.bool(keepdim), _opt_dtype(dtype)))


_SUM = R["sum"]
_SUM_ALL = (None, False, None)


def prod(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Product of elements over ``dim`` (int, tuple or None for all); integers multiply in int64.

    Args/Returns/Raises: as :func:`sum`.
    """
    return _apply(R["prod"], (input,), (_dims(dim, input.ndim), builtins.bool(keepdim), _opt_dtype(dtype)))


def mean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Mean over ``dim`` (int, tuple or None for all).

    Raises:
        DTypeError: an integer or bool input without ``dtype=`` (torch refuses to guess the result type).
        IndexOutOfRangeError: a dim out of range.
    """
    if dtype is not None:
        input = input.to(dtype)
    if not input.dtype.is_inexact:
        raise DTypeError(
            f"mean(): could not infer output dtype. Input dtype must be floating point or complex, "
            f"got {input.dtype}; pass dtype= or convert with .float()"
        )
    return _reduce("mean", input, dim, keepdim)


def amax(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Maximum over ``dim`` (int or tuple; ``()`` means all dims); gradient split evenly between ties."""
    return _reduce("amax", input, dim, keepdim)


def amin(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Minimum over ``dim`` (int or tuple; ``()`` means all dims)."""
    return _reduce("amin", input, dim, keepdim)


# ``(values, indices)`` like torch.return_types; a namedtuple, so graph mode can return it (a JAX pytree)


def _extreme(name, input, dim, keepdim):
    if input.ndim == 0:
        return _on_scalar(input, lambda x, d: _extreme(name, x, d, keepdim), dim)
    d = _dim(dim, input.ndim)
    if input.shape[d] == 0:
        raise IndexOutOfRangeError(
            f"{name[:3]}(): cannot reduce over dimension {d} of size 0 (input shape {list(input.shape)})"
        )
    return _MinMax(*_apply(R[name], (input,), (d, builtins.bool(keepdim))))


def _other(what, dim, other):
    if other is not None and dim is not None:
        raise TypeError(f"{what}() takes either dim or other, not both")
    return dim if other is None else other


def max(input: Tensor, dim=None, keepdim: bool = False, *, other=None):
    """The largest element; with ``dim``: ``(values, indices)`` along it; with a tensor: elementwise maximum.

    Args:
        input: the tensor.
        dim: None (all elements), an int, or a Tensor ``other`` (then ``maximum(input, other)``).
        keepdim: keep the reduced dimension with size 1.
        other: torch's keyword for the elementwise form.
    Returns:
        A tensor, or a ``(values, indices)`` tuple with ``.values`` / ``.indices``.
    Raises:
        IndexOutOfRangeError: ``dim`` out of range.
    """
    if other is not None:
        dim = _other("max", dim, other)
    if isinstance(dim, Tensor):
        return maximum(input, dim)
    if dim is None:
        return _reduce("amax", input, None, False)
    return _extreme("max_dim", input, dim, keepdim)


def min(input: Tensor, dim=None, keepdim: bool = False, *, other=None):
    """The smallest element; with ``dim``: ``(values, indices)``; with a tensor: elementwise minimum.

    Args/Returns/Raises: as :func:`max`.
    """
    if other is not None:
        dim = _other("min", dim, other)
    if isinstance(dim, Tensor):
        return minimum(input, dim)
    if dim is None:
        return _reduce("amin", input, None, False)
    return _extreme("min_dim", input, dim, keepdim)


def _arg(name, input, dim, keepdim):
    if dim is not None and input.ndim == 0:
        return _on_scalar(input, lambda x, d: _arg(name, x, d, keepdim), dim)
    return _apply(R[name], (input,), (None if dim is None else _dim(dim, input.ndim), builtins.bool(keepdim)))


def argmax(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Index (int64) of the largest element, over the flattened tensor or along ``dim``."""
    return _arg("argmax", input, dim, keepdim)


def argmin(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Index (int64) of the smallest element, over the flattened tensor or along ``dim``."""
    return _arg("argmin", input, dim, keepdim)


def _moments(name, input, dim, unbiased, keepdim, correction):
    if isinstance(dim, builtins.bool):  # torch's legacy var(input, unbiased)
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise OpError(f"{name}: pass either unbiased or correction, not both")
    if correction is None:
        correction = 0 if unbiased is False else 1
    elif builtins.float(correction).is_integer():
        correction = builtins.int(correction)
    statics = (_dims(dim, input.ndim), correction, builtins.bool(keepdim))
    if input.dtype.is_complex:  # torch: the variance of |z - mean|^2, the real and imaginary parts' sum (real)
        v = _apply(R["var"], (_apply(R["real"], (input,)),), statics)
        v = v + _apply(R["var"], (_apply(R["imag"], (input,)),), statics)
        return v if name == "var" else v.sqrt()
    if not input.dtype.is_floating_point:
        raise DTypeError(f"{name}(): expected a floating point or complex input, got {input.dtype}")
    return _apply(R[name], (input,), statics)


def var(input: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *, correction=None) -> Tensor:
    """Variance over ``dim``, divided by ``N - correction`` (default 1, Bessel; ``unbiased=False`` is 0).

    Args:
        input: a floating tensor.
        dim: int, tuple, or None for all elements (``var(x, False)`` is torch's legacy ``unbiased`` form).
        unbiased: legacy switch between ``correction=1`` (True) and ``0`` (False).
        keepdim: keep reduced dimensions.
        correction: the difference between sample size and degrees of freedom.
    Raises:
        DTypeError: integer or bool input.
        IndexOutOfRangeError: a dim out of range.
    """
    return _moments("var", input, dim, unbiased, keepdim, correction)


def std(input: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *, correction=None) -> Tensor:
    """Standard deviation over ``dim``: the square root of :func:`var` (same arguments)."""
    return _moments("std", input, dim, unbiased, keepdim, correction)


def var_mean(
    input: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *, correction=None
) -> tuple[Tensor, Tensor]:
    """``(var(input, ...), mean(input, ...))`` over the same dims."""
    if isinstance(dim, builtins.bool):
        dim, unbiased = None, dim
    return var(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def std_mean(
    input: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *, correction=None
) -> tuple[Tensor, Tensor]:
    """``(std(input, ...), mean(input, ...))`` over the same dims."""
    if isinstance(dim, builtins.bool):
        dim, unbiased = None, dim
    return std(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def logsumexp(input: Tensor, dim, keepdim: bool = False) -> Tensor:
    """``log(sum(exp(input), dim))`` computed stably; integer inputs give the default float dtype."""
    return _reduce("logsumexp", input, dim, keepdim)


def norm(input: Tensor, p: builtins.float | str | None = "fro", dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    """Vector p-norm over ``dim`` (all elements when None); ``"fro"`` and None mean the 2-norm.

    Args:
        input: the tensor.
        p: a number (including ``inf``, ``-inf`` and 0, the count of non-zeros) or ``"fro"``.
        dim: int, tuple or None.
        keepdim: keep reduced dimensions.
        dtype: cast the input to this dtype first.
    Raises:
        OpError: an unsupported ``p`` (matrix norms such as ``"nuc"`` are not implemented).
    """
    if dtype is not None:
        input = input.to(dtype)
    if p is None:
        p = "fro"
    if isinstance(p, (builtins.int, builtins.float)) and not isinstance(p, builtins.bool):
        p = builtins.float(p) if not builtins.float(p).is_integer() or math.isinf(p) else builtins.int(p)
    elif p != "fro":
        raise OpError(f"norm: unsupported p={p!r}; use a number, inf, -inf or 'fro'")
    return _apply(R["norm"], (input,), (p, _dims(dim, input.ndim), builtins.bool(keepdim)))


def _logical_reduce(name, input, dim, keepdim):
    if dim is not None and not isinstance(dim, (builtins.int, np.integer)) and len(tuple(dim)) == 0:
        return ne(input, 0) if input.dtype is not D.bool_ else input  # torch: an empty dim list reduces nothing
    return _reduce(name, input, dim, keepdim)


def all(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Whether every element (over ``dim``: int, tuple or None) is non-zero; a bool tensor."""
    return _logical_reduce("all", input, dim, keepdim)


def any(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Whether any element (over ``dim``: int, tuple or None) is non-zero; a bool tensor."""
    return _logical_reduce("any", input, dim, keepdim)


def _scan(name, input, dim, dtype):
    if input.ndim == 0:
        return _on_scalar(input, lambda x, d: _scan(name, x, d, dtype), dim)
    return _apply(R[name], (input,), (_dim(dim, input.ndim), _opt_dtype(dtype)))


def cumsum(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """Running sum along ``dim`` (integers accumulate in int64 unless ``dtype`` says otherwise).

    Raises:
        IndexOutOfRangeError: ``dim`` out of range.
    """
    return _scan("cumsum", input, dim, dtype)


def cumprod(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """Running product along ``dim``."""
    return _scan("cumprod", input, dim, dtype)


def _softmax_like(name, input, dim, dtype):
    if dtype is not None:
        input = input.to(dtype)
    if dim is None:  # torch's legacy implicit choice
        dim = 0 if input.ndim in (0, 1, 3) else 1
    if input.ndim == 0:
        return _on_scalar(input, lambda x, d: _softmax_like(name, x, d, None), dim)
    return _apply(R[name], (input,), (_dim(dim, input.ndim),))


def softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``dim``.

    Args:
        input: the tensor (integers are computed in the default float dtype).
        dim: the dimension that sums to one.
        dtype: cast to this dtype first.
    Raises:
        IndexOutOfRangeError: ``dim`` out of range.
    """
    return _softmax_like("softmax", input, dim, dtype)


def log_softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    """``log(softmax(x))`` along ``dim``, computed stably (same arguments as :func:`softmax`)."""
    return _softmax_like("log_softmax", input, dim, dtype)
