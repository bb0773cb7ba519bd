"""``lf.fft``: torch.fft's discrete Fourier transforms with its ``n``/``s``, ``dim`` and ``norm`` arguments.

Dtypes follow torch: complex transforms of float32 (and integer/bool, promoted to the default float dtype, and
float16/bfloat16, computed in float32) give complex64, of float64 complex128; ``irfft``/``hfft`` give the matching
real dtype. ``norm``: ``"backward"`` (default: no scaling forward, ``1/n`` inverse), ``"ortho"`` (``1/sqrt(n)``
both ways) or ``"forward"`` (``1/n`` forward). Gradients are ``jax.vjp`` of ``jax.numpy.fft``, with the tape's
conversion to torch's complex convention; they equal torch's, including the one-sided transforms (tested).

>>> lf.fft.rfft(lf.tensor([1.0, 2.0, 3.0, 4.0]))
tensor([10.+0.j, -2.+2.j, -2.+0.j])
"""

from __future__ import annotations

import builtins

import numpy as np

from .._core import dtypes as D
from .._core.context import state
from .._core.errors import DTypeError, ValueRangeError
from .._core.formats import check_layout
from .._creation import tensor
from .._functional import conj, roll
from .._tensor import Tensor, _dim
from ..ops.table import REGISTRY as R

__all__ = [
    "fft",
    "ifft",
    "fft2",
    "ifft2",
    "fftn",
    "ifftn",
    "rfft",
    "irfft",
    "rfft2",
    "irfft2",
    "rfftn",
    "irfftn",
    "hfft",
    "ihfft",
    "hfft2",
    "ihfft2",
    "hfftn",
    "ihfftn",
    "fftfreq",
    "rfftfreq",
    "fftshift",
    "ifftshift",
]

_NORMS = ("backward", "ortho", "forward")
_SWAP = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def _norm(fn: str, norm) -> str:
    if norm is None:
        return "backward"
    if norm not in _NORMS:
        raise ValueRangeError(f"{fn}: invalid normalization mode {norm!r}; expected one of {_NORMS} or None")
    return norm


def _arg(fn: str, x) -> Tensor:
    if not isinstance(x, Tensor):
        raise DTypeError(f"fft.{fn}(): argument 'input' must be a Tensor, got {type(x).__name__}")
    return x


def _plan(fn: str, x: Tensor, s, dim, last_default=None):
    """torch's (s, dim) rules: dims default to the last len(s) dims (all dims without s); s entries of -1 keep the
    input's size. Returns (s tuple or None, dims tuple)."""
    if dim is None:
        dims = tuple(range(x.ndim)) if s is None else tuple(range(x.ndim - len(s), x.ndim))
    else:
        dims = tuple(_dim(builtins.int(d), x.ndim) for d in ((dim,) if isinstance(dim, builtins.int) else dim))
        if len(set(dims)) != len(dims):
            raise ValueRangeError(f"fft.{fn}: dims must be unique, got {dim}")
    if s is None:
        return None, dims
    s = tuple(builtins.int(n) for n in s)
    if len(s) != len(dims):
        raise ValueRangeError(
            f"fft.{fn}: when given, dim and shape arguments must have the same length, got s={s}, dim={dim}"
        )
    if len(dims) > x.ndim:
        raise ValueRangeError(f"fft.{fn}: got shape with {len(s)} values but input tensor only has {x.ndim} dims")
    s = tuple(x.shape[d] if n == -1 else n for n, d in zip(s, dims))
    if last_default is not None and s[-1] == -1:
        s = s[:-1] + (last_default,)
    for n in s:
        if n < 1:
            raise ValueRangeError(f"fft.{fn}: Invalid number of data points ({n}) specified; n must be >= 1")
    return s, dims


def _c2c(fn, x, s, dim, norm, inverse) -> Tensor:
    x = _arg(fn, x)
    s, dims = _plan(fn, x, s, dim)
    return state.interp.apply(R["fft_c2c"], (x,), (s, dims, _norm(fn, norm), inverse))


def _r2c(fn, x, s, dim, norm) -> Tensor:
    x = _arg(fn, x)
    s, dims = _plan(fn, x, s, dim)
    return state.interp.apply(R["fft_r2c"], (x,), (s, dims, _norm(fn, norm)))


def _c2r(fn, x, s, dim, norm) -> Tensor:
    x = _arg(fn, x)
    s, dims = _plan(fn, x, s, dim)
    if s is None:
        last = 2 * (x.shape[dims[-1]] - 1) if dims else 0
        if dims and last < 1:
            raise ValueRangeError(
                f"fft.{fn}: Invalid number of data points ({last}) specified: the default output length "
                f"2 * (input size - 1) needs an input of size >= 2 along dim {dims[-1]}; pass n/s"
            )
        s = tuple(x.shape[d] for d in dims[:-1]) + ((last,) if dims else ())
    return state.interp.apply(R["fft_c2r"], (x,), (s, dims, _norm(fn, norm)))


def _one(n, dim):
    return (None if n is None else (n,)), (dim,)


def fft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The 1-D discrete Fourier transform along ``dim`` (``n``: pad with zeros or trim to that length first).

    Raises:
        ValueRangeError: ``n < 1`` or an unknown ``norm``.
    """
    return _c2c("fft", input, *_one(n, dim), norm, False)


def ifft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The 1-D inverse discrete Fourier transform along ``dim``."""
    return _c2c("ifft", input, *_one(n, dim), norm, True)


def fft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """The 2-D discrete Fourier transform over ``dim`` (the last two by default)."""
    return _c2c("fft2", input, s, dim, norm, False)


def ifft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """The 2-D inverse discrete Fourier transform."""
    return _c2c("ifft2", input, s, dim, norm, True)


def fftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """The N-D discrete Fourier transform over ``dim`` (all dims, or the last ``len(s)``, by default)."""
    return _c2c("fftn", input, s, dim, norm, False)


def ifftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """The N-D inverse discrete Fourier transform."""
    return _c2c("ifftn", input, s, dim, norm, True)


def rfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The one-sided 1-D transform of a real tensor: ``n // 2 + 1`` frequencies.

    Raises:
        DTypeError: a complex input (use :func:`fft`).
    """
    return _r2c("rfft", input, *_one(n, dim), norm)


def irfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The inverse of :func:`rfft`: a real signal of length ``n`` (default ``2 * (size - 1)``; pass an odd ``n`` to
    recover an odd-length signal). The imaginary parts of the zero (and, for even ``n``, Nyquist) frequencies are
    ignored, as in torch.

    Raises:
        ValueRangeError: ``n < 1`` (also the default length for an input of size 1).
    """
    return _c2r("irfft", input, *_one(n, dim), norm)


def rfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """The 2-D :func:`rfftn`."""
    return _r2c("rfft2", input, s, dim, norm)


def irfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """The 2-D :func:`irfftn`."""
    return _c2r("irfft2", input, s, dim, norm)


def rfftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """The N-D transform of a real tensor, one-sided over the last of ``dim``."""
    return _r2c("rfftn", input, s, dim, norm)


def irfftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """The inverse of :func:`rfftn` (output sizes ``s``; the last defaults to ``2 * (size - 1)``)."""
    return _c2r("irfftn", input, s, dim, norm)


def hfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The transform of a Hermitian-symmetric signal given by its one-sided half: a real result of length ``n``."""
    return _c2r("hfft", conj(_arg("hfft", input)), *_one(n, dim), _SWAP[_norm("hfft", norm)])


def ihfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The inverse of :func:`hfft`: the one-sided half of a real signal's inverse transform."""
    return conj(_r2c("ihfft", input, *_one(n, dim), _SWAP[_norm("ihfft", norm)]))


def hfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """The 2-D :func:`hfftn`."""
    return _c2r("hfft2", conj(_arg("hfft2", input)), s, dim, _SWAP[_norm("hfft2", norm)])


def ihfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """The 2-D :func:`ihfftn`."""
    return conj(_r2c("ihfft2", input, s, dim, _SWAP[_norm("ihfft2", norm)]))


def hfftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """The N-D transform of a Hermitian-symmetric signal given by its one-sided half over the last of ``dim``."""
    return _c2r("hfftn", conj(_arg("hfftn", input)), s, dim, _SWAP[_norm("hfftn", norm)])


def ihfftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """The inverse of :func:`hfftn`."""
    return conj(_r2c("ihfftn", input, s, dim, _SWAP[_norm("ihfftn", norm)]))


def _freq(fn: str, k: np.ndarray, n: int, d: float, dtype, device, requires_grad: bool) -> Tensor:
    if n < 0:
        raise ValueRangeError(f"fft.{fn}: n must be non-negative, got {n}")
    dt = D.get_default_dtype() if dtype is None else D.to_dtype(dtype)
    if not dt.is_floating_point:
        raise DTypeError(f"fft.{fn}: expected a floating dtype, got {dt.name}")
    vals = k.astype(dt.np) * dt.np.type(1.0 / (n * d)) if n else k.astype(dt.np)
    return tensor(vals, dtype=dt, device=device, requires_grad=requires_grad)


def fftfreq(n: int, d: float = 1.0, *, dtype=None, device=None, requires_grad: bool = False, layout=None) -> Tensor:
    """The sample frequencies of :func:`fft` of length ``n`` with sample spacing ``d``:
    ``[0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (d * n)``."""
    check_layout(layout, "fft.fftfreq()")
    k = np.concatenate([np.arange((n - 1) // 2 + 1), np.arange(-(n // 2), 0)]) if n > 0 else np.zeros(0)
    return _freq("fftfreq", k, n, d, dtype, device, requires_grad)


def rfftfreq(n: int, d: float = 1.0, *, dtype=None, device=None, requires_grad: bool = False, layout=None) -> Tensor:
    """The sample frequencies of :func:`rfft` of length ``n``: ``[0, 1, ..., n // 2] / (d * n)``."""
    check_layout(layout, "fft.rfftfreq()")
    return _freq("rfftfreq", np.arange(n // 2 + 1) if n > 0 else np.zeros(0), n, d, dtype, device, requires_grad)


def _shift(input: Tensor, dim, sign: int) -> Tensor:
    x = _arg("fftshift", input)
    dims = tuple(range(x.ndim)) if dim is None else ((dim,) if isinstance(dim, builtins.int) else tuple(dim))
    if not dims:
        return x
    dims = tuple(_dim(builtins.int(d), x.ndim) for d in dims)
    shifts = tuple(x.shape[d] // 2 if sign > 0 else (x.shape[d] + 1) // 2 for d in dims)
    return roll(x, shifts, dims)


def fftshift(input: Tensor, dim=None) -> Tensor:
    """Move the zero frequency to the centre (a roll by ``size // 2`` over ``dim``, all dims by default)."""
    return _shift(input, dim, 1)


def ifftshift(input: Tensor, dim=None) -> Tensor:
    """The inverse of :func:`fftshift`."""
    return _shift(input, dim, -1)
