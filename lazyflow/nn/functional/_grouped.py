"""``F.grouped_mm``: torch 2.13's grouped GEMM (mixture-of-experts layers: one weight per expert, jagged token
counts), over the ``grouped_mm`` op record."""

from __future__ import annotations

from ..._core import dtypes as D
from ..._core.context import state
from ..._core.errors import DTypeError, NotSupportedError, ShapeError
from ..._tensor import Tensor
from ...ops.table import REGISTRY as R

__all__ = ["grouped_mm"]

_GROUPED_MM = R["grouped_mm"]


def grouped_mm(
    mat_a: Tensor, mat_b: Tensor, *, offs: Tensor | None = None, bias: Tensor | None = None, out_dtype=None
) -> Tensor:
    """One matrix multiply per group, as ``torch.nn.functional.grouped_mm``.

    * ``mat_a (m, k)``, ``mat_b (g, k, n)``, ``offs (g,)``: rows ``offs[i-1]:offs[i]`` of ``mat_a`` times
      ``mat_b[i]``; result ``(m, n)`` (rows past ``offs[-1]`` are 0 here; torch leaves them unset).
    * ``mat_a (g, m, k)``, ``mat_b (g, k, n)``, no ``offs``: a batched matmul, ``(g, m, n)``.
    * ``mat_a (m, k)``, ``mat_b (k, n)``, ``offs (g,)``: the ``k`` dimension in groups, ``(g, m, n)`` (an MoE
      weight gradient).
    * ``mat_a (g, m, k)``, ``mat_b (k, n)``, ``offs (g,)``: the columns ``offs[i-1]:offs[i]`` of ``mat_b`` times
      ``mat_a[i]``, ``(m, n)``.

    bfloat16/float16 inputs accumulate in float32 and return their own dtype. Gradients flow to both matrices.
    Unlike torch's CUDA kernel there is no 16-byte stride or dtype restriction (any float dtype, any sizes).

    Args:
        mat_a, mat_b: 2-D or 3-D float tensors of one dtype.
        offs: int32 group ends (increasing), required when an operand is 2-D, refused when both are 3-D.
        bias: must be None (torch: "Bias not supported yet").
        out_dtype: None or ``mat_a``'s dtype (torch's CPU build refuses any other).
    Returns:
        The grouped products (shapes above).
    Raises:
        ShapeError: an operand that is not 2-D/3-D, contraction sizes or group counts that differ.
        DTypeError: ``offs`` not int32, operands of different or non-float dtypes, another ``out_dtype``.
        NotSupportedError: a ``bias`` (torch raises too).
    """
    if mat_a.ndim not in (2, 3) or mat_b.ndim not in (2, 3):
        which = "mat_a" if mat_a.ndim not in (2, 3) else "mat_b"
        raise ShapeError(
            f"grouped_mm: {which} has to be 2 or 3d, got shapes {list(mat_a.shape)} and {list(mat_b.shape)}"
        )
    if bias is not None:
        raise NotSupportedError("grouped_mm: Bias not supported yet (as in torch); add the bias to the result")
    if mat_a.dtype is not mat_b.dtype or not mat_a.dtype.is_floating_point:
        raise DTypeError(
            f"grouped_mm: expected two float tensors of one dtype, got {mat_a.dtype.name} and {mat_b.dtype.name}"
        )
    if out_dtype is not None and out_dtype is not mat_a.dtype:
        raise DTypeError(
            f"grouped_mm: Grouped gemm output dtype must match `mat_a` dtype ({mat_a.dtype.name}), got {out_dtype}"
        )
    mode = f"{mat_a.ndim}d{mat_b.ndim}d"
    if (offs is None) != (mode == "3d3d"):
        raise ShapeError(
            "grouped_mm: Have to provide offsets if there is a 2d matrix, or no offset if both matrices are 3d "
            f"(got shapes {list(mat_a.shape)}, {list(mat_b.shape)} and offs={'None' if offs is None else 'given'})"
        )
    if offs is not None and (offs.ndim != 1 or offs.dtype is not D.int32):
        raise DTypeError(f"grouped_mm: Offsets have to be int32 and 1-D, got {offs.dtype.name} {list(offs.shape)}")
    k_a, k_b = mat_a.shape[-1], mat_b.shape[-2]
    if k_a != k_b:
        raise ShapeError(f"grouped_mm: contraction dimension of mat_a and mat_b must match, got {k_a} and {k_b}")
    n_groups = offs.shape[0] if offs is not None else mat_a.shape[0]
    other = {"3d3d": mat_b.shape[0], "2d3d": mat_b.shape[0], "3d2d": mat_a.shape[0]}.get(mode, n_groups)
    if n_groups != other:
        raise ShapeError(f"grouped_mm: matrix batch sizes have to match, got {n_groups} groups and {other}")
    return state.interp.apply(_GROUPED_MM, (mat_a, mat_b, offs), (mode,))
