"""``lf.Size``: a tensor's shape, a tuple of ints as ``torch.Size`` is."""

from __future__ import annotations

import operator
from typing import SupportsIndex, overload

from jax.export import is_symbolic_dim as _is_symbolic


class Size(tuple[int, ...]):
    """The shape of a tensor (``t.shape``, ``t.size()``): a tuple subclass, equal to and hashing like the plain
    tuple of its ints, so it works wherever a tuple of sizes does; slicing and ``+`` keep the type, as torch's do.

    ``lf.Size([2, 3])`` builds one from any iterable of integers (numpy integers and 0-d integer tensors too).
    """

    __slots__ = ()

    def __new__(cls, sizes=()):
        try:
            return super().__new__(cls, (operator.index(s) for s in sizes))
        except TypeError:
            sizes = tuple(sizes)
            # a symbolic dimension of jax.export (lf.export's dynamic shapes) stays as it is
            if sizes and all(_is_symbolic(s) or isinstance(s, int) for s in sizes):
                return super().__new__(cls, sizes)
            raise TypeError(f"lazyflow.Size() takes an iterable of ints, got {sizes!r}") from None

    def numel(self) -> int:
        """The number of elements a tensor of this shape holds (1 for ``Size([])``)."""
        n = 1
        for s in self:
            n *= s
        return n

    @overload
    def __getitem__(self, i: SupportsIndex) -> int: ...

    @overload
    def __getitem__(self, i: slice) -> Size: ...

    def __getitem__(self, i):
        r = tuple.__getitem__(self, i)
        return Size(r) if isinstance(i, slice) else r

    def __add__(self, other):  # pyright: ignore[reportIncompatibleMethodOverride]  # tuple's returns a tuple
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(self, other))

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(other, self))

    def __mul__(self, n: SupportsIndex) -> Size:
        return Size(tuple.__mul__(self, n))

    __rmul__ = __mul__

    def __repr__(self) -> str:
        return f"lazyflow.Size({list(self)})"

    def __reduce__(self):
        return (Size, (tuple(self),))
