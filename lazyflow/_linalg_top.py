"""torch's top-level matrix functions: the fused products (``addmm``, ``baddbmm``, ``addr``...), ``inner``/
``vdot``/``tensordot``, and the older spellings of ``torch.linalg`` (``inverse``, ``det``, ``svd(some=)``,
``qr(some=)``, ``cholesky(upper=)``...). Composites over lf.linalg and matmul; ``matrix_exp`` and
``triangular_solve`` are primitives (lazyflow/ops/linalg_extra.py). Attached as Tensor methods by _methods.py."""

from __future__ import annotations

import builtins
import collections
from collections.abc import Sequence

from . import linalg as LA
from ._core.errors import DTypeError, NotSupportedError, ShapeError
from ._creation import eye
from ._functional import clone, einsum, matmul, outer, transpose, where
from ._functional._common import _apply
from ._functional.special import _composite_ip
from ._tensor import Tensor, _dim
from .ops.table import REGISTRY as R

__all__ = [
    "addbmm",
    "addmm",
    "addmv",
    "addr",
    "baddbmm",
    "chain_matmul",
    "cholesky",
    "cholesky_inverse",
    "cholesky_solve",
    "cross",
    "det",
    "ger",
    "inner",
    "inverse",
    "logdet",
    "lu_solve",
    "lu_unpack",
    "matrix_exp",
    "matrix_power",
    "pinverse",
    "qr",
    "slogdet",
    "svd",
    "tensordot",
    "triangular_solve",
    "vdot",
]
NOT_METHODS = frozenset({"chain_matmul", "tensordot", "cholesky_solve", "lu_unpack"})


def _scaled(beta, input: Tensor, alpha, prod: Tensor) -> Tensor:
    """``beta * input + alpha * prod``; ``beta == 0`` ignores ``input`` (its NaNs too), as torch."""
    p = prod if alpha == 1 else prod * alpha
    if beta == 0:
        return p
    return (input if beta == 1 else input * beta) + p


def _need(name: str, t: Tensor, nd: int, what: str) -> None:
    if t.ndim != nd:
        raise ShapeError(f"{name}: {what} must be a {nd}-D tensor, got shape {list(t.shape)}")


def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * (mat1 @ mat2)`` (``input`` broadcast to the product's shape).

    Raises:
        ShapeError: ``mat1``/``mat2`` not 2-D or not chainable.
    """
    _need("addmm", mat1, 2, "mat1")
    _need("addmm", mat2, 2, "mat2")
    return _scaled(beta, input, alpha, matmul(mat1, mat2))


def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * (mat @ vec)``."""
    _need("addmv", mat, 2, "mat")
    _need("addmv", vec, 1, "vec")
    return _scaled(beta, input, alpha, matmul(mat, vec))


def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * outer(vec1, vec2)``."""
    _need("addr", vec1, 1, "vec1")
    _need("addr", vec2, 1, "vec2")
    return _scaled(beta, input, alpha, outer(vec1, vec2))


def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * bmm(batch1, batch2)``."""
    _need("baddbmm", batch1, 3, "batch1")
    _need("baddbmm", batch2, 3, "batch2")
    return _scaled(beta, input, alpha, matmul(batch1, batch2))


def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * sum_b batch1[b] @ batch2[b]``."""
    _need("addbmm", batch1, 3, "batch1")
    _need("addbmm", batch2, 3, "batch2")
    return _scaled(beta, input, alpha, einsum("bij,bjk->ik", batch1, batch2))


def ger(input: Tensor, vec2: Tensor) -> Tensor:
    """The outer product (``torch.ger``, the old name of :func:`outer`)."""
    return outer(input, vec2)


def inner(input: Tensor, other: Tensor) -> Tensor:
    """Sum of products over the last dims (a scalar operand multiplies)."""
    if input.ndim == 0 or (isinstance(other, Tensor) and other.ndim == 0):
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise ShapeError(
            f"inner() the last dimension must match on both input tensors but got shapes {list(input.shape)} and "
            f"{list(other.shape)}"
        )
    return tensordot(input, other, ([input.ndim - 1], [other.ndim - 1]))


def vdot(input: Tensor, other: Tensor) -> Tensor:
    """Dot product of two 1-D tensors of the same dtype (for real tensors the same as ``dot``)."""
    if input.ndim != 1 or other.ndim != 1:
        raise ShapeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    if input.dtype is not other.dtype:
        raise DTypeError(f"vdot: expected both vectors to have same dtype, but found {input.dtype} and {other.dtype}")
    return input.dot(other)


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def tensordot(a: Tensor, b: Tensor, dims: object = 2) -> Tensor:
    """Contract ``dims`` dims: an int (the last ``dims`` of ``a`` with the first of ``b``) or two lists of dims.

    Raises:
        ShapeError: contracted dims of different sizes.
    """
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, builtins.int):
        if dims < 0:
            raise ShapeError(f"tensordot expects dims >= 0, but got dims={dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = dims  # type: ignore[misc]
        da = [da] if isinstance(da, builtins.int) else list(da)
        db = [db] if isinstance(db, builtins.int) else list(db)
    da = [_dim(d, a.ndim) for d in da]
    db = [_dim(d, b.ndim) for d in db]
    if len(da) != len(db):
        raise ShapeError(f"both dimension lists should have same length, got {len(da)} and {len(db)}")
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise ShapeError(
                f"contracted dimensions need to match, but first has size {a.shape[i]} in dim {i} and second has "
                f"size {b.shape[j]} in dim {j}"
            )
    la = _LETTERS[: a.ndim]
    lb = list(_LETTERS[a.ndim : a.ndim + b.ndim])
    for i, j in zip(da, db):
        lb[j] = la[i]
    out = "".join(c for k, c in enumerate(la) if k not in da) + "".join(c for k, c in enumerate(lb) if k not in db)
    return einsum(f"{la},{''.join(lb)}->{out}", a, b)


def chain_matmul(*matrices) -> Tensor:
    """The product of 2-D matrices in order (``torch.chain_matmul``, now ``linalg.multi_dot``)."""
    if len(matrices) == 1 and isinstance(matrices[0], Sequence):
        matrices = tuple(matrices[0])
    return LA.multi_dot(list(matrices))


def matrix_power(input: Tensor, n: int) -> Tensor:
    """``input`` to the integer power ``n`` (batched square matrices; ``n < 0`` inverts first, ``n == 0`` gives I).

    Raises:
        ShapeError: not square matrices.
    """
    if input.ndim < 2 or input.shape[-1] != input.shape[-2]:
        raise ShapeError(f"matrix_power: expected a (batch of) square matrices, got shape {list(input.shape)}")
    if n == 0:
        return eye(input.shape[-1], dtype=input.dtype).expand(*input.shape)
    a = LA.inv(input) if n < 0 else input
    n = builtins.abs(n)
    result: Tensor | None = None
    while n:
        if n & 1:
            result = a if result is None else matmul(result, a)
        n >>= 1
        if n:
            a = matmul(a, a)
    assert result is not None  # n >= 1 here
    return clone(result) if result is input else result


def matrix_exp(A: Tensor) -> Tensor:
    """The matrix exponential of each square matrix (Pade approximation with scaling and squaring)."""
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ShapeError(f"matrix_exp: expected a (batch of) square matrices, got shape {list(A.shape)}")
    return _apply(R["matrix_exp"], (A,))


def inverse(input: Tensor) -> Tensor:
    """:func:`lazyflow.linalg.inv` (``torch.inverse``)."""
    return LA.inv(input)


def det(input: Tensor) -> Tensor:
    """:func:`lazyflow.linalg.det`."""
    return LA.det(input)


def slogdet(input: Tensor):
    """:func:`lazyflow.linalg.slogdet`: ``(sign, logabsdet)``."""
    return LA.slogdet(input)


def logdet(input: Tensor) -> Tensor:
    """``log(det(input))``: NaN for a negative determinant, -inf for a singular matrix."""
    s, la = LA.slogdet(input)
    return where(s < 0, builtins.float("nan"), la)


def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """The pseudo-inverse, singular values below ``rcond * max`` treated as zero."""
    return LA.pinv(input, rtol=rcond)


def cholesky(input: Tensor, upper: bool = False) -> Tensor:
    """``torch.cholesky`` (``upper`` positional): :func:`lazyflow.linalg.cholesky`."""
    return LA.cholesky(input, upper=upper)


def cholesky_solve(B: Tensor, L: Tensor, upper: bool = False) -> Tensor:
    """Solve ``A X = B`` given the Cholesky factor ``L`` of ``A`` (lower, or upper with ``upper=True``)."""
    y = triangular_solve(B, L, upper=upper, transpose=upper).solution
    return triangular_solve(y, L, upper=upper, transpose=not upper).solution


def cholesky_inverse(L: Tensor, upper: bool = False) -> Tensor:
    """The inverse of ``A`` from its Cholesky factor ``L``."""
    n = L.shape[-1]
    return cholesky_solve(eye(n, dtype=L.dtype).expand(*L.shape), L, upper)


_TriSolve = collections.namedtuple("triangular_solve", ["solution", "cloned_coefficient"])


def triangular_solve(b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False, unitriangular: bool = False):
    """Solve ``A X = b`` (``A^T X = b`` with ``transpose``) for triangular ``A``; returns ``(solution,
    cloned_coefficient)``. Only the ``upper`` (or lower) triangle of ``A`` is read.

    Raises:
        ShapeError: ``A`` not square or ``b`` of another row count.
    """
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ShapeError(f"triangular_solve: A must be batches of square matrices, got shape {list(A.shape)}")
    if b.ndim < 2 or b.shape[-2] != A.shape[-1]:
        raise ShapeError(f"triangular_solve: incompatible shapes of A {list(A.shape)} and b {list(b.shape)}")
    flags = (builtins.bool(upper), builtins.bool(transpose), builtins.bool(unitriangular))
    x = _apply(R["triangular_solve"], (b, A), flags)
    return _TriSolve(x, clone(A).expand(*x.shape[:-2], *A.shape[-2:]))


_SVD = collections.namedtuple("svd", ["U", "S", "V"])
_QR = collections.namedtuple("qr", ["Q", "R"])


def svd(input: Tensor, some: bool = True, compute_uv: bool = True):
    """``(U, S, V)`` with ``input = U diag(S) V^T`` (``torch.svd``: V, not Vh; ``some=False`` gives full U and V;
    ``compute_uv=False`` gives zero-filled U and V)."""
    u, s, vh = LA.svd(input, full_matrices=not some)
    v = transpose(vh, -2, -1)
    if not compute_uv:
        return _SVD(u.new_zeros(u.shape), s, v.new_zeros(v.shape))
    return _SVD(u, s, v)


def qr(input: Tensor, some: bool = True):
    """``(Q, R)`` (``torch.qr``: ``some=False`` is linalg's ``"complete"`` mode)."""
    q, r = LA.qr(input, "reduced" if some else "complete")
    return _QR(q, r)


def cross(input: Tensor, other: Tensor, dim=None) -> Tensor:
    """The 3-D cross product along ``dim`` (default: the first dim of size 3, as torch)."""
    if dim is None:
        shape = tuple(builtins.max(a, b) for a, b in zip(input.shape, other.shape))
        dim = next((i for i, s in enumerate(shape) if s == 3), -1)
    return LA.cross(input, other, dim=dim)


_LU = collections.namedtuple("lu_unpack", ["P", "L", "U"])


def _lu(self: Tensor, pivot: bool = True, get_infos: bool = False):
    """``(LU, pivots)`` (and ``infos`` with ``get_infos``) of square matrices, as ``torch.Tensor.lu``: ``L`` (unit
    diagonal, not stored) and ``U`` packed in ``LU``, LAPACK's 1-based int32 pivots.

    Raises:
        ShapeError: not square. NotSupportedError: ``pivot=False`` (no pivoting: a GPU-only path in torch).
    """
    if self.ndim < 2 or self.shape[-1] != self.shape[-2]:
        raise ShapeError(f"lu: expected a (batch of) square matrices, got shape {list(self.shape)}")
    if not pivot:
        raise NotSupportedError("lu(pivot=False) is not supported (torch runs it only on CUDA)")
    lu, piv = _apply(R["lu_factor"], (self,))
    if get_infos:
        return lu, piv, piv.new_zeros(piv.shape[:-1])
    return lu, piv


def lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True, unpack_pivots: bool = True):
    """``(P, L, U)`` from :meth:`Tensor.lu`'s packed factors, with ``A = P @ L @ U`` (empty tensors for the parts not
    unpacked)."""
    n = LU_data.shape[-1]
    if unpack_data:
        low = LU_data.tril(-1) + eye(n, dtype=LU_data.dtype)
        up = LU_data.triu()
    else:
        low = up = LU_data.new_zeros((0,))
    p = _apply(R["lu_permutation"], (LU_pivots,)).to(LU_data.dtype) if unpack_pivots else LU_data.new_zeros((0,))
    return _LU(p, low, up)


def lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor) -> Tensor:
    """The solution of ``A X = b`` from ``A``'s LU factorization (:meth:`Tensor.lu`)."""
    p, low, up = lu_unpack(LU_data, LU_pivots)
    y = triangular_solve(matmul(transpose(p, -2, -1), b), low, upper=False, unitriangular=True).solution
    return triangular_solve(y, up, upper=True).solution


def _cholesky_solve_method(self: Tensor, input2: Tensor, upper: bool = False) -> Tensor:
    """``self.cholesky_solve(input2)``: :func:`cholesky_solve` with ``input2`` the Cholesky factor (torch's name)."""
    return cholesky_solve(self, input2, upper)


METHOD_ONLY = {
    **{n + "_": _composite_ip(globals()[n], n) for n in ("addmm", "addmv", "addr", "baddbmm", "addbmm")},
    "cholesky_solve": _cholesky_solve_method,
    "lu": _lu,
}
