"""More activation and distance layers: PReLU, RReLU, Hardshrink, Softshrink, Softmax2d, CosineSimilarity,
PairwiseDistance, ChannelShuffle (torch's constructor arguments, parameter names and reprs)."""

from __future__ import annotations

from ..._core.errors import ShapeError, ValueRangeError
from ..._creation import empty
from ..._tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter

__all__ = [
    "PReLU",
    "RReLU",
    "Hardshrink",
    "Softshrink",
    "Softmax2d",
    "CosineSimilarity",
    "PairwiseDistance",
    "ChannelShuffle",
]


class PReLU(Module):
    """``max(0, x) + weight * min(0, x)`` with a learned slope (one, or one per channel).

    Args:
        num_parameters: 1 (shared) or the number of input channels (dim 1).
        init: the initial slope.
        device, dtype: where and in which dtype to create ``weight``.
    Attributes:
        weight: ``(num_parameters,)``, filled with ``init``.
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None) -> None:
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(empty(num_parameters, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Fill ``weight`` with ``init``."""
        init.constant_(self.weight, self.init)

    def forward(self, input: Tensor) -> Tensor:
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class RReLU(Module):
    """Randomized leaky ReLU: slopes ``U(lower, upper)`` while training, ``(lower + upper) / 2`` in eval."""

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False) -> None:
        super().__init__()
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")


class Hardshrink(Module):
    """``x`` where ``|x| > lambd``, else 0."""

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:
        return F.hardshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Softshrink(Module):
    """``x -/+ lambd`` outside ``[-lambd, lambd]``, else 0."""

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:
        return F.softshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return str(self.lambd)


class Softmax2d(Module):
    """Softmax over the channels of ``(N, C, H, W)`` or ``(C, H, W)`` input.

    Raises:
        ShapeError (on call): an input that is not 3-D or 4-D.
    """

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in (3, 4):
            raise ShapeError(
                f"Softmax2d: expected input to be 3D (C, H, W) or 4D (N, C, H, W), got {input.ndim}D "
                f"(shape {list(input.shape)})"
            )
        return F.softmax(input, -3)


class CosineSimilarity(Module):
    """:func:`~lazyflow.nn.functional.cosine_similarity` along ``dim``."""

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """:func:`~lazyflow.nn.functional.pairwise_distance`: the ``p``-norm of ``x1 - x2 + eps`` (last dim)."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class ChannelShuffle(Module):
    """Interleave ``groups`` groups of channels (ShuffleNet).

    Raises:
        ValueRangeError: ``groups`` not positive.
    """

    def __init__(self, groups: int) -> None:
        super().__init__()
        if groups <= 0:
            raise ValueRangeError(f"ChannelShuffle: groups must be a positive integer, got {groups}")
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"
