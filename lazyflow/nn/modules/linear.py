"""``Identity``, ``Linear`` and ``Bilinear`` with torch's parameters, shapes and default initialisation."""

from __future__ import annotations

import math
from typing import Any

from ..._core.errors import ShapeError
from ..._creation import empty
from ..._tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter

__all__ = ["Identity", "Linear", "Bilinear"]


def _layer_shape_error(layer: Module, expected: str, got: Tensor) -> ShapeError:
    return ShapeError(
        f"{layer._get_name()}({layer.extra_repr()}): expected input of shape {expected}, got "
        f"input of shape {list(got.shape)}"
    )


class Identity(Module):
    """Returns its input unchanged (constructor arguments are accepted and ignored)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Linear(Module):
    """``y = x @ weight.T + bias``.

    Args:
        in_features: size of the last input dimension.
        out_features: size of the last output dimension.
        bias: whether to learn an additive bias.
        device, dtype: where and in which floating dtype to create the parameters.
    Attributes:
        weight: ``(out_features, in_features)``, U(-1/sqrt(in_features), 1/sqrt(in_features)) (torch's
            ``kaiming_uniform_(a=sqrt(5))``).
        bias: ``(out_features,)``, same bound.
    Raises:
        ShapeError (on call): the last input dimension is not ``in_features``.
    >>> lf.nn.Linear(20, 30)(lf.randn(128, 20)).shape
    (128, 30)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(empty((out_features, in_features), device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-draw the parameters from the default distributions."""
        init._reset_fan_in_(self.weight, self.bias)

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim == 0 or input.shape[-1] != self.in_features:
            raise _layer_shape_error(self, f"(*, {self.in_features})", input)
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Bilinear(Module):
    """``y = x1 @ weight @ x2 + bias`` per output feature.

    Args:
        in1_features, in2_features: sizes of the last dimensions of the two inputs.
        out_features: size of the last output dimension.
        bias: whether to learn an additive bias.
    Attributes:
        weight: ``(out_features, in1_features, in2_features)``, U(-1/sqrt(in1), 1/sqrt(in1)).
        bias: ``(out_features,)``, same bound.
    Raises:
        ShapeError (on call): input shapes that do not fit.
    """

    def __init__(
        self, in1_features: int, in2_features: int, out_features: int, bias: bool = True, device=None, dtype=None
    ) -> None:
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(empty((out_features, in1_features, in2_features), device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-draw the parameters from the default distributions."""
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        if (
            input1.ndim == 0
            or input1.shape[-1] != self.in1_features
            or input2.ndim == 0
            or input2.shape[-1] != self.in2_features
            or input1.shape[:-1] != input2.shape[:-1]
        ):
            raise ShapeError(
                f"{self._get_name()}({self.extra_repr()}): expected inputs of shapes "
                f"(*, {self.in1_features}) and (*, {self.in2_features}) with equal leading "
                f"dimensions, got {list(input1.shape)} and {list(input2.shape)}"
            )
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )
