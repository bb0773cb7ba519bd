"""``lf.linalg``: torch.linalg's functions with torch's signatures, named-tuple fields and errors.

Factorizations and solves are primitives over ``jnp.linalg`` (batched over leading dims); norms, ``pinv``,
``lstsq``, ``matrix_rank``, ``cross``, ``vecdot`` and ``multi_dot`` are composites. Sign and order conventions of
``svd``, ``qr`` and ``eigh`` vectors may differ from torch's LAPACK calls by a sign per vector (both are valid
factorizations); values, reconstructions and invariants agree.
"""

from __future__ import annotations

import builtins
import collections
import math

import numpy as np

from .._core import dtypes as D
from .._core.errors import DTypeError, ShapeError, ValueRangeError
from .._creation import tensor
from .._functional._common import _apply, _t
from .._functional.elementwise import abs, maximum
from .._functional.indexing import index_select
from .._functional.linalg import matmul
from .._functional.reduction import amax, amin, sum
from .._functional.reduction import norm as _pnorm
from .._functional.shape import broadcast_shapes, movedim
from .._tensor import Tensor, _dim
from ..ops.table import REGISTRY as R

__all__ = [
    "cholesky",
    "cholesky_ex",
    "cross",
    "det",
    "eigh",
    "eigvalsh",
    "inv",
    "inv_ex",
    "lstsq",
    "matmul",
    "matrix_norm",
    "matrix_rank",
    "multi_dot",
    "norm",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "svd",
    "svdvals",
    "vecdot",
    "vector_norm",
]

_Slogdet = collections.namedtuple("slogdet", ["sign", "logabsdet"])
_QR = collections.namedtuple("qr", ["Q", "R"])
_Eigh = collections.namedtuple("eigh", ["eigenvalues", "eigenvectors"])
_SVD = collections.namedtuple("svd", ["U", "S", "Vh"])
_InvEx = collections.namedtuple("inv_ex", ["inverse", "info"])
_CholeskyEx = collections.namedtuple("cholesky_ex", ["L", "info"])
_Lstsq = collections.namedtuple("lstsq", ["solution", "residuals", "rank", "singular_values"])


def _matrix(name: str, A, square: bool = False) -> Tensor:
    A = _t(A)
    if A.ndim < 2:
        raise ShapeError(f"linalg.{name}: A must have at least 2 dimensions, got shape {list(A.shape)}")
    if square and A.shape[-1] != A.shape[-2]:
        raise ShapeError(
            f"linalg.{name}: A must be batches of square matrices, but they are {A.shape[-2]} by {A.shape[-1]} matrices"
        )
    return A


# ---------------------------------------------------------------- norms
def vector_norm(x: Tensor, ord: float = 2, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """The ``ord``-norm of ``x`` as a vector over ``dim`` (all elements when None): ``inf``/``-inf`` give the max/min
    absolute value, 0 the count of non-zeros.

    Raises:
        DTypeError: an integer input (torch: floating inputs only). IndexOutOfRangeError: a dim out of range.
    >>> lf.linalg.vector_norm(lf.tensor([3.0, 4.0]))
    tensor(5.)
    """
    x = _t(x)
    if dtype is not None:
        x = x.to(dtype)
    if not x.is_floating_point():
        raise DTypeError(f"linalg.vector_norm: expected a floating point tensor, got {x.dtype}")
    if isinstance(ord, str):
        raise ValueRangeError(f"linalg.vector_norm: ord must be a number, got {ord!r}")
    return _pnorm(x, builtins.float(ord), dim, keepdim)


def matrix_norm(A: Tensor, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None) -> Tensor:
    """A matrix norm over the two dims ``dim``: ``"fro"``, ``"nuc"``, ``2``/``-2`` (largest/smallest singular
    value), ``1``/``-1`` (max/min column sum of absolute values), ``inf``/``-inf`` (max/min row sum).

    Raises:
        ValueRangeError: another ``ord``. ShapeError: fewer than 2 dims, or ``dim`` that is not two distinct dims.
    """
    A = _matrix("matrix_norm", A)
    if dtype is not None:
        A = A.to(dtype)
    if not A.is_floating_point():
        raise DTypeError(f"linalg.matrix_norm: expected a floating point tensor, got {A.dtype}")
    if len(dim) != 2:
        raise ShapeError(f"linalg.matrix_norm: dim must be a 2-tuple, got {dim}")
    d0, d1 = _dim(dim[0], A.ndim), _dim(dim[1], A.ndim)
    if d0 == d1:
        raise ShapeError(f"linalg.matrix_norm: dims must be different, got {dim}")
    if ord == "fro":
        return _pnorm(A, 2.0, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        s = svdvals(movedim(A, (d0, d1), (-2, -1)))
        out = sum(s, -1) if ord == "nuc" else (amax(s, -1) if ord == 2 else amin(s, -1))
        if keepdim:
            out = out.unsqueeze(builtins.min(d0, d1)).unsqueeze(builtins.max(d0, d1))
        return out
    if ord in (1, -1, math.inf, -math.inf):
        summed, other = (d0, d1) if ord in (1, -1) else (d1, d0)
        s = sum(abs(A), summed, keepdim=True)
        out = amax(s, other, keepdim=True) if ord > 0 else amin(s, other, keepdim=True)
        return out if keepdim else out.squeeze((d0, d1))
    raise ValueRangeError(f"linalg.matrix_norm: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, got {ord!r}")


def norm(input: Tensor, ord=None, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """``vector_norm`` when ``dim`` is an int (or None with ``ord`` None: all elements), ``matrix_norm`` when
    ``dim`` is a 2-tuple or when ``A`` is 2-D with ``dim`` None and an ``ord`` given.

    Raises:
        ShapeError: ``ord`` given with ``dim`` None on a tensor that is not 1-D or 2-D.
    """
    A = _t(input)
    if isinstance(dim, int):
        dim = (dim,)
    if dim is None and ord is not None:
        if A.ndim not in (1, 2):
            raise ShapeError(f"linalg.norm: with ord given and dim None, A must be 1-D or 2-D, got {A.ndim}-D")
        dim = tuple(range(A.ndim))
    if dim is not None and len(dim) == 2:
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


# ---------------------------------------------------------------- inverses, solves, determinants
def inv(A: Tensor) -> Tensor:
    """The inverse of each square matrix in ``A`` (batched).

    Raises:
        ShapeError: not square. DTypeError: not floating. OpError: a singular matrix (torch's LinAlgError, eager).
    """
    return _apply(R["linalg_inv"], (_matrix("inv", A, square=True),))


def inv_ex(A: Tensor, *, check_errors: bool = False):
    """``(inverse, info)``: :func:`inv` without raising; ``info`` (int32 per matrix) is 0, or 1 + the index of the
    first zero pivot of a singular matrix (whose inverse then holds infs/NaNs). ``check_errors=True`` raises as
    :func:`inv` does."""
    A = _matrix("inv_ex", A, square=True)
    if check_errors:
        return _InvEx(inv(A), A.new_zeros(A.shape[:-2], dtype=D.int32))
    inverse, info = _apply(R["linalg_inv_ex"], (A,))
    return _InvEx(inverse, info)


def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """The solution ``X`` of ``A X = B`` (``X A = B`` with ``left=False``); ``B`` may be a batch of vectors.

    Raises:
        ShapeError: ``A`` not square, or ``B`` that does not fit. OpError: a singular ``A`` (eager).
    """
    A, B = _matrix("solve", A, square=True), _t(B)
    n = A.shape[-1]
    vector = left and B.ndim >= 1 and (B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1])))
    if vector:
        B2 = B
    elif B.ndim < 2 or (B.shape[-2] if left else B.shape[-1]) != n:
        raise ShapeError(f"linalg.solve: incompatible shapes of A {list(A.shape)} and B {list(B.shape)}")
    else:
        B2 = B
    if vector and B.ndim == 1:
        return _apply(R["linalg_solve"], (A, B.unsqueeze(-1)), (True,)).squeeze(-1)
    batch = broadcast_shapes(A.shape[:-2], B2.shape[: -1 if vector else -2])
    A = A.expand(*batch, n, n)
    B2 = B2.expand(*batch, n) if vector else B2.expand(*batch, *B2.shape[-2:])
    return _apply(R["linalg_solve"], (A, B2), (builtins.bool(left),))


def det(A: Tensor) -> Tensor:
    """The determinant of each square matrix (batched)."""
    return _apply(R["linalg_det"], (_matrix("det", A, square=True),))


def slogdet(A: Tensor):
    """``(sign, logabsdet)`` of each square matrix; a singular matrix gives ``(0, -inf)``."""
    sign_, logabs = _apply(R["linalg_slogdet"], (_matrix("slogdet", A, square=True),))
    return _Slogdet(sign_, logabs)


def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    """The Cholesky factor ``L`` (``A = L L^T``) of each symmetric positive-definite matrix; ``upper=True`` gives
    ``L^T``. Only the lower triangle of ``A`` is read.

    Raises:
        OpError: a matrix that is not positive-definite (torch's LinAlgError, eager).
    """
    return _apply(R["linalg_cholesky"], (_matrix("cholesky", A, square=True),), (builtins.bool(upper),))


def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False):
    """``(L, info)``: :func:`cholesky` without raising; ``info`` (int32 per matrix) is 0, or the order of the first
    leading minor that is not positive-definite (then ``L`` holds NaNs from there, where torch leaves a partial
    factor). ``check_errors=True`` raises as :func:`cholesky` does."""
    A = _matrix("cholesky_ex", A, square=True)
    if check_errors:
        return _CholeskyEx(cholesky(A, upper=upper), A.new_zeros(A.shape[:-2], dtype=D.int32))
    low, info = _apply(R["linalg_cholesky_ex"], (A,), (builtins.bool(upper),))
    return _CholeskyEx(low, info)


# ---------------------------------------------------------------- decompositions
def qr(A: Tensor, mode: str = "reduced"):
    """``(Q, R)`` with ``A = Q R``; ``mode`` ``"reduced"``, ``"complete"`` or ``"r"`` (then ``Q`` is empty)."""
    A = _matrix("qr", A)
    if mode not in ("reduced", "complete", "r"):
        raise ValueRangeError(f"linalg.qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    q, r = _apply(R["linalg_qr"], (A,), (mode,))
    return _QR(q, r)


def eigh(A: Tensor, UPLO: str = "L"):
    """``(eigenvalues, eigenvectors)`` of symmetric matrices, eigenvalues ascending; only the ``UPLO`` triangle
    is read."""
    A = _matrix("eigh", A, square=True)
    if UPLO not in ("L", "U"):
        raise ValueRangeError(f"linalg.eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    w, v = _apply(R["linalg_eigh"], (A,), (UPLO,))
    return _Eigh(w, v)


def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:
    """The eigenvalues of symmetric matrices, ascending."""
    return eigh(A, UPLO).eigenvalues


def svd(A: Tensor, full_matrices: bool = True, *, driver=None):
    """``(U, S, Vh)`` with ``A = U diag(S) Vh``, ``S`` descending."""
    u, s, vh = _apply(R["linalg_svd"], (_matrix("svd", A),), (builtins.bool(full_matrices),))
    return _SVD(u, s, vh)


def svdvals(A: Tensor, *, driver=None) -> Tensor:
    """The singular values of ``A``, descending."""
    return _apply(R["linalg_svdvals"], (_matrix("svdvals", A),))


def _tolerance(s: Tensor, m: int, n: int, atol, rtol) -> Tensor:
    smax = amax(s, -1, keepdim=True) if s.shape[-1] else s.sum(-1, keepdim=True)
    if rtol is None:
        rtol = _eps(s.dtype) * builtins.max(m, n) if atol is None or atol == 0 else 0.0
    tol = smax * rtol
    return tol if atol is None else maximum(tol, _t(atol).to(s.dtype))


def _eps(dtype) -> builtins.float:
    return builtins.float(np.finfo(dtype.np).eps)


def pinv(A: Tensor, *, atol=None, rtol=None, hermitian: bool = False) -> Tensor:
    """The Moore-Penrose pseudo-inverse via the SVD: singular values at or below ``max(atol, rtol * s_max)`` are
    treated as zero (default ``rtol``: ``eps * max(m, n)`` when ``atol`` is None or 0)."""
    A = _matrix("pinv", A)
    u, s, vh = svd(A, full_matrices=False)
    tol = _tolerance(s, A.shape[-2], A.shape[-1], atol, rtol)
    keep = s > tol
    s_inv = (keep.to(s.dtype) / s.where(keep, s.new_ones(()))).unsqueeze(-1)
    return matmul(vh.transpose(-2, -1), s_inv * u.transpose(-2, -1))


def matrix_rank(A: Tensor, *, atol=None, rtol=None, hermitian: bool = False) -> Tensor:
    """The number of singular values above ``max(atol, rtol * s_max)`` (int64), with :func:`pinv`'s defaults."""
    A = _matrix("matrix_rank", A)
    s = svdvals(A)
    return sum(s > _tolerance(s, A.shape[-2], A.shape[-1], atol, rtol), -1)


def lstsq(A: Tensor, B: Tensor, rcond=None, *, driver=None):
    """The least-squares solution of ``A X = B``, as torch's ``(solution, residuals, rank, singular_values)``.

    Computed through :func:`pinv` (the minimum-norm solution). As with torch's default CPU driver ``"gelsy"``,
    ``residuals`` and ``singular_values`` are empty and ``rank`` is computed; with ``driver="gelsd"``/``"gelss"``
    ``singular_values`` are returned too, and ``residuals`` (the squared residual norms per column) when ``m > n``.

    Raises:
        ValueRangeError: an unknown driver. ShapeError: row counts that differ.
    """
    A, B = _matrix("lstsq", A), _t(B)
    if driver not in (None, "gels", "gelsy", "gelsd", "gelss"):
        raise ValueRangeError(f"linalg.lstsq: driver must be one of gels, gelsy, gelsd, gelss, got {driver!r}")
    vector = B.ndim == A.ndim - 1
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.ndim < 2 or Bm.shape[-2] != A.shape[-2]:
        raise ShapeError(f"linalg.lstsq: A {list(A.shape)} and B {list(B.shape)} must have the same number of rows")
    m, n = A.shape[-2], A.shape[-1]
    rtol = rcond if rcond is not None and rcond > 0 else None
    X = matmul(pinv(A, rtol=rtol), Bm)
    empty = A.new_zeros((0,))
    drv = driver or "gelsy"
    if drv in ("gelsd", "gelss", "gels") and m > n:
        residuals = sum((matmul(A, X) - Bm) ** 2, -2)
    else:
        residuals = empty
    rank = matrix_rank(A, rtol=rtol) if drv != "gels" else tensor(np.zeros(0, np.int64))
    singular_values = svdvals(A) if drv in ("gelsd", "gelss") else empty
    return _Lstsq(X.squeeze(-1) if vector else X, residuals, rank, singular_values)


# ---------------------------------------------------------------- products
def cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:
    """The cross product of 3-vectors along ``dim`` (operands broadcast).

    Raises:
        ShapeError: size of ``dim`` is not 3, or shapes that do not broadcast.
    """
    a, b = _t(input), _t(other)
    shape = broadcast_shapes(a.shape, b.shape)
    a, b = a.expand(*shape), b.expand(*shape)
    d = _dim(dim, len(shape))
    if shape[d] != 3:
        raise ShapeError(f"linalg.cross: dimension {dim} must have size 3, got {shape[d]}")
    i1, i2 = tensor(np.array([1, 2, 0])), tensor(np.array([2, 0, 1]))

    def at(x, i):
        return index_select(x, d, i)

    return at(a, i1) * at(b, i2) - at(a, i2) * at(b, i1)


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """The dot product of vectors along ``dim`` (operands broadcast): ``sum(x * y, dim)``."""
    x, y = _t(x), _t(y)
    prod = x * y
    return sum(prod, _dim(dim, prod.ndim))


def multi_dot(tensors) -> Tensor:
    """``tensors[0] @ tensors[1] @ ...``; the first may be 1-D (a row) and the last 1-D (a column).

    Raises:
        ShapeError: fewer than two tensors, or inner operands that are not 2-D.
    """
    ts = [_t(t) for t in tensors]
    if len(ts) < 2:
        raise ShapeError(f"linalg.multi_dot expects at least 2 tensors, got {len(ts)}")
    for i, t in enumerate(ts):
        ok = t.ndim == 2 or (t.ndim == 1 and i in (0, len(ts) - 1))
        if not ok:
            raise ShapeError(
                f"linalg.multi_dot: tensor {i} must be 2-D (the first and last may be 1-D), got shape {list(t.shape)}"
            )
    out = ts[0]
    for t in ts[1:]:
        out = matmul(out, t)
    return out
