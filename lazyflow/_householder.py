"""``lf.geqrf``, ``lf.orgqr`` and ``lf.ormqr`` (and their Tensor methods): torch's Householder QR functions over the
op records in ``lazyflow/ops/householder.py``."""

from __future__ import annotations

from ._core.errors import ShapeError
from ._functional._common import _apply, _t
from ._tensor import Tensor
from .ops.table import REGISTRY as R

__all__ = ["geqrf", "orgqr", "ormqr"]


def _check(name: str, input: Tensor, tau: Tensor) -> None:
    if input.ndim < 2:
        raise ShapeError(f"torch.{name}: input must have at least 2 dimensions, got shape {list(input.shape)}")
    if tau.ndim != input.ndim - 1 or tuple(tau.shape[:-1]) != tuple(input.shape[:-2]):
        raise ShapeError(
            f"torch.{name}: tau must have the batch shape of input plus one dimension, got input "
            f"{list(input.shape)} and tau {list(tau.shape)}"
        )
    if tau.shape[-1] > min(input.shape[-2:]) if name == "orgqr" else tau.shape[-1] > input.shape[-1]:
        raise ShapeError(
            f"torch.{name}: tau has {tau.shape[-1]} reflectors, more than input's {list(input.shape)} allows"
        )


def geqrf(input: Tensor) -> tuple[Tensor, Tensor]:
    """The QR decomposition in LAPACK's compact form: ``(a, tau)`` with ``R`` on and above ``a``'s diagonal and the
    Householder vectors below it (torch.geqrf; no gradient, as torch has none).

    Raises:
        ShapeError: fewer than 2 dimensions.  DTypeError: not float32/float64.
    """
    x = _t(input)
    if x.ndim < 2:
        raise ShapeError(f"torch.geqrf: input must have at least 2 dimensions, got shape {list(x.shape)}")
    a, tau = _apply(R["geqrf"], (x,))
    return a, tau


def orgqr(input: Tensor, tau: Tensor) -> Tensor:
    """The first ``n`` columns of ``Q = H_0 ... H_{k-1}`` from :func:`geqrf`'s ``(input, tau)`` (m x n, n <= m);
    torch.orgqr (``linalg.householder_product``). Differentiable.

    Raises:
        ShapeError: mismatched shapes, or more columns than rows.  DTypeError: not float32/float64.
    """
    x, t = _t(input), _t(tau)
    _check("orgqr", x, t)
    if x.shape[-1] > x.shape[-2]:
        raise ShapeError(f"torch.orgqr: input must have at least as many rows as columns, got {list(x.shape)}")
    return _apply(R["householder_product"], (x, t))


def ormqr(input: Tensor, tau: Tensor, other: Tensor, left: bool = True, transpose: bool = False) -> Tensor:
    """``op(Q) @ other`` (``left``) or ``other @ op(Q)``, ``op`` the transpose when ``transpose``, for ``Q`` of
    :func:`geqrf`'s ``(input, tau)``; torch.ormqr. Differentiable.

    Raises:
        ShapeError: ``other``'s rows (``left``) or columns do not match ``Q``'s size.
    """
    x, t, c = _t(input), _t(tau), _t(other)
    _check("ormqr", x, t)
    size = c.shape[-2] if left else c.shape[-1]
    if c.ndim != x.ndim or size != x.shape[-2]:
        raise ShapeError(
            f"torch.ormqr: other of shape {list(c.shape)} does not fit Q of size {x.shape[-2]} "
            f"({'rows' if left else 'columns'} must match input's {x.shape[-2]} rows)"
        )
    return _apply(R["ormqr"], (x, t, c), (bool(left), bool(transpose)))


def _orgqr_method(self: Tensor, input2: Tensor) -> Tensor:
    """``Tensor.orgqr(tau)``: :func:`orgqr` (torch names the method's parameter ``input2``)."""
    return orgqr(self, input2)


def _ormqr_method(self: Tensor, input2: Tensor, input3: Tensor, left: bool = True, transpose: bool = False) -> Tensor:
    """``Tensor.ormqr(tau, other, left, transpose)``: :func:`ormqr` (torch names them ``input2``, ``input3``)."""
    return ormqr(self, input2, input3, left, transpose)


METHODS = {"geqrf": geqrf, "orgqr": _orgqr_method, "ormqr": _ormqr_method}
