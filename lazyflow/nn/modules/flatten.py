"""``Flatten`` and ``Unflatten``."""

from __future__ import annotations

from ..._core.errors import IndexOutOfRangeError, ShapeError
from ..._tensor import Tensor
from ..module import Module

__all__ = ["Flatten", "Unflatten"]


class Flatten(Module):
    """Flatten dimensions ``start_dim`` .. ``end_dim`` into one (default: all but the batch dimension).

    Raises:
        IndexOutOfRangeError (on call): a dimension outside the input's range.
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Tensor) -> Tensor:
        try:
            return input.flatten(self.start_dim, self.end_dim)
        except (IndexOutOfRangeError, ShapeError) as e:
            raise type(e)(
                f"Flatten({self.extra_repr()}): cannot flatten input of shape {list(input.shape)}: {e}"
            ) from None

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dimension ``dim`` into ``unflattened_size`` (one entry may be -1).

    Raises:
        ShapeError (on call): the sizes do not multiply to the size of ``dim``.
    """

    def __init__(self, dim: int, unflattened_size) -> None:
        super().__init__()
        if not isinstance(dim, int):
            raise TypeError(f"Unflatten: dim must be an int, got {type(dim).__name__}")
        if not isinstance(unflattened_size, (tuple, list)) or not all(isinstance(s, int) for s in unflattened_size):
            raise TypeError(f"Unflatten: unflattened_size must be a tuple of ints, got {unflattened_size!r}")
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input: Tensor) -> Tensor:
        try:
            return input.unflatten(self.dim, self.unflattened_size)
        except (IndexOutOfRangeError, ShapeError) as e:
            raise type(e)(
                f"Unflatten({self.extra_repr()}): expected dimension {self.dim} of the input to hold "
                f"{self.unflattened_size}, got input of shape {list(input.shape)}: {e}"
            ) from None

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
