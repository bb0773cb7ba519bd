"""``LinearCrossEntropyLoss`` and ``LinearCrossEntropyOptions`` (torch 2.13): a ``linear`` projection to class
logits fused with cross entropy; parameters under ``linear.*`` as torch's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..._core.errors import NotSupportedError
from ..._tensor import Tensor
from .. import functional as F
from ..module import Module
from .linear import Linear

__all__ = ["LinearCrossEntropyLoss", "LinearCrossEntropyOptions"]


@dataclass
class LinearCrossEntropyOptions:
    """torch's chunking options of :func:`~lazyflow.nn.functional.linear_cross_entropy`: accepted and recorded;
    lazyflow computes the reference formula (XLA fuses the projection and the loss)."""

    allow_retain_graph: bool = False
    batch_chunk_size: int | None = None
    chunking_method: str | None = "auto"
    acc_policy: str = "auto"
    acc_dtype: Any = None


class LinearCrossEntropyLoss(Module):
    """``cross_entropy(linear(input), target)`` with a learned ``linear`` (``num_classes x in_features``).

    Raises:
        NotSupportedError: ``out_features != ()`` (K-dimensional logits).
    """

    def __init__(
        self,
        in_features: int,
        num_classes: int,
        *,
        out_features: tuple[int, ...] = (),
        bias: bool = False,
        device=None,
        dtype=None,
        reduction: str = "mean",
        weight: Tensor | None = None,
        ignore_index: int | None = None,
        label_smoothing: float = 0.0,
        options: LinearCrossEntropyOptions | None = None,
    ) -> None:
        super().__init__()
        if tuple(out_features) != ():
            raise NotSupportedError("LinearCrossEntropyLoss: out_features (K-dimensional logits) is not supported yet")
        self.in_features = in_features
        self.num_classes = num_classes
        self.out_features = tuple(out_features)
        self.reduction = reduction
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing
        self.options = options
        self.register_buffer("weight", weight)
        self.linear = Linear(in_features, num_classes, bias=bias, device=device, dtype=dtype)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.linear_cross_entropy(
            input,
            self.linear.weight,
            target,
            linear_bias=self.linear.bias,
            weight=self.weight,
            reduction=self.reduction,
            ignore_index=self.ignore_index,
            label_smoothing=self.label_smoothing,
            options=self.options,
        )

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, num_classes={self.num_classes}, out_features={self.out_features}, "
            f"bias={self.linear.bias is not None}, reduction={self.reduction}, ignore_index={self.ignore_index}, "
            f"label_smoothing={self.label_smoothing}, options={self.options}"
        )
