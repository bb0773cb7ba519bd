"""``nn.utils.fusion``: fold an eval-mode BatchNorm into the preceding convolution or linear layer (torch's
formulas: ``w' = w * gamma / sqrt(var + eps)``, ``b' = (b - mean) * gamma / sqrt(var + eps) + beta``)."""

from __future__ import annotations

import copy
from typing import TypeVar

from ..._creation import ones_like, zeros_like
from ..._tensor import Tensor
from ...autograd import no_grad
from ..module import Module
from ..parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]

_M = TypeVar("_M", bound=Module)


def _eval_only(a: Module, b: Module) -> None:
    if a.training or b.training:
        raise ValueError(
            f"Fusion only for eval! Call .eval() on {a._get_name()} and {b._get_name()} first "
            "(training-mode BatchNorm normalizes with batch statistics, which cannot be folded)"
        )


def fuse_conv_bn_weights(
    conv_w: Tensor,
    conv_b: Tensor | None,
    bn_rm: Tensor,
    bn_rv: Tensor,
    bn_eps: float,
    bn_w: Tensor | None,
    bn_b: Tensor | None,
    transpose: bool = False,
) -> tuple[Parameter, Parameter]:
    """The fused convolution ``(weight, bias)`` as new Parameters (output channels on dim 0, or 1 if ``transpose``)."""
    with no_grad():
        cb = zeros_like(bn_rm) if conv_b is None else conv_b
        w = ones_like(bn_rm) if bn_w is None else bn_w
        b = zeros_like(bn_rm) if bn_b is None else bn_b
        rsqrt = (bn_rv + bn_eps).rsqrt()
        shape = ([1, -1] if transpose else [-1, 1]) + [1] * (conv_w.ndim - 2)
        fw = (conv_w * (w * rsqrt).reshape(shape)).to(conv_w.dtype)
        fb = ((cb - bn_rm) * rsqrt * w + b).to(cb.dtype)
    return Parameter(fw, conv_w.requires_grad), Parameter(fb, conv_b.requires_grad if conv_b is not None else True)


def fuse_conv_bn_eval(conv: _M, bn: Module, transpose: bool = False) -> _M:
    """A copy of ``conv`` whose weight and bias include ``bn``'s eval-mode normalization.

    Raises:
        ValueError: either module in training mode.
    """
    _eval_only(conv, bn)
    fused = copy.deepcopy(conv)
    if bn.running_mean is None or bn.running_var is None:
        raise ValueError("fuse_conv_bn_eval: the BatchNorm must track running statistics")
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias, transpose
    )
    return fused


def fuse_linear_bn_weights(
    linear_w: Tensor,
    linear_b: Tensor | None,
    bn_rm: Tensor,
    bn_rv: Tensor,
    bn_eps: float,
    bn_w: Tensor,
    bn_b: Tensor,
) -> tuple[Parameter, Parameter]:
    """The fused linear ``(weight, bias)`` as new Parameters."""
    with no_grad():
        lb = zeros_like(bn_rm) if linear_b is None else linear_b
        scale = bn_w * (bn_rv + bn_eps).rsqrt()
        fw = linear_w * scale.unsqueeze(-1)
        fb = (lb - bn_rm) * scale + bn_b
    return Parameter(fw, linear_w.requires_grad), Parameter(
        fb, linear_b.requires_grad if linear_b is not None else True
    )


def fuse_linear_bn_eval(linear: _M, bn: Module) -> _M:
    """A copy of ``linear`` whose weight and bias include ``bn``'s eval-mode normalization.

    Raises:
        ValueError: either module in training mode, or a BatchNorm of another size than the output
            (other than 1).
    """
    _eval_only(linear, bn)
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise ValueError(
            "To fuse, linear.out_features must equal bn.num_features or bn.num_features must be 1, got "
            f"{linear.out_features} and {bn.num_features}"
        )
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias
    )
    return fused
