"""Datasets (``torch.utils.data``): map-style and iterable, tensor, subset, concatenation, random split."""

from __future__ import annotations

import bisect
import itertools
import math
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from typing import Generic, TypeVar, cast

import numpy as np

from ..._core.errors import ShapeError
from ..._creation import tensor
from ..._tensor import Tensor
from .collate import GatheredBatch
from .sampler import _rng

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset", "ChainDataset", "random_split"]

T_co = TypeVar("T_co", covariant=True)


class Dataset(Generic[T_co]):
    """A map-style dataset: subclasses implement ``__getitem__`` (and usually ``__len__``).

    A subclass may also implement ``__getitems__(indices) -> list of samples`` to fetch a batch at once;
    the DataLoader then calls it instead of ``__getitem__`` per index.
    """

    def __getitem__(self, index) -> T_co:
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co], Iterable[T_co]):
    """A dataset that is a stream: subclasses implement ``__iter__``.

    With worker processes every worker iterates its own copy; use ``get_worker_info()`` inside
    ``__iter__`` to give each worker a different shard, or samples are duplicated.
    """

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def __add__(self, other: Dataset) -> ChainDataset:
        return ChainDataset([self, other])


class TensorDataset(Dataset[tuple]):
    """Samples are the rows of the given tensors (``dataset[i] == tuple(t[i] for t in tensors)``).

    Args:
        tensors: lazyflow Tensors or numpy arrays with the same first dimension.
    Raises:
        ShapeError: tensors whose first dimensions differ.
    >>> ds = TensorDataset(lf.randn(100, 3), lf.arange(100))
    """

    def __init__(self, *tensors) -> None:
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        sizes = [t.shape[0] if t.ndim else None for t in tensors]
        if any(s is None for s in sizes) or len(set(sizes)) != 1:
            raise ShapeError(f"Size mismatch between tensors: first dimensions {sizes} (all must be equal)")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __getitems__(self, indices: list[int]) -> GatheredBatch:
        """The samples at ``indices`` as one gather per tensor (a sequence of samples)."""
        cols = []
        for t in self.tensors:
            if isinstance(t, Tensor):
                cols.append(t[tensor(np.asarray(indices, dtype=np.int64))])
            else:
                cols.append(t[np.asarray(indices, dtype=np.int64)])
        return GatheredBatch(cols)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class Subset(Dataset[T_co]):
    """The samples of ``dataset`` at ``indices``.

    Args:
        dataset: the full dataset.
        indices: positions in ``dataset``, in the order of the subset.
    """

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list[int]) -> list:
        mapped = [self.indices[i] for i in indices]
        getitems: Callable[[list[int]], list] | None = getattr(self.dataset, "__getitems__", None)
        if callable(getitems):
            return getitems(mapped)
        return [self.dataset[i] for i in mapped]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset[T_co]):
    """Several map-style datasets one after another.

    Args:
        datasets: non-empty iterable of map-style datasets.
    Raises:
        ValueError: no dataset. TypeError: an IterableDataset.
    """

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = list(itertools.accumulate(len(cast(Sized, d)) for d in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        d = bisect.bisect_right(self.cumulative_sizes, idx)
        start = 0 if d == 0 else self.cumulative_sizes[d - 1]
        return self.datasets[d][idx - start]


class ChainDataset(IterableDataset):
    """Several iterable datasets chained one after another.

    Args:
        datasets: the iterable datasets.
    """

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self) -> int:
        return sum(len(cast(Sized, d)) for d in self.datasets)


def random_split(dataset: Dataset, lengths: Sequence[int | float], generator=None) -> list[Subset]:
    """Split ``dataset`` into non-overlapping random subsets of the given lengths.

    Args:
        dataset: the dataset to split.
        lengths: subset sizes summing to ``len(dataset)``, or fractions summing to 1 (remainders are
            spread one by one over the subsets, round robin, like torch).
        generator: a ``lazyflow.Generator`` (default: the global one, so ``lf.manual_seed`` fixes the
            split) or a ``numpy.random.Generator``.
    Returns:
        One ``Subset`` per length.
    Raises:
        ValueError: lengths that do not add up, or a fraction outside [0, 1].
    >>> train, val = random_split(ds, [0.8, 0.2], generator=lf.Generator().manual_seed(42))
    """
    n = len(cast(Sized, dataset))
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        sizes = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            sizes.append(int(math.floor(n * frac)))
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        for i, size in enumerate(sizes):
            if size == 0:
                warnings.warn(
                    f"Length of split at index {i} is 0. This might result in an empty dataset.", stacklevel=2
                )
        lengths = sizes
    if sum(lengths) != n:
        raise ValueError(f"Sum of input lengths ({sum(lengths)}) does not equal the length of the input dataset ({n})!")
    perm = _rng(generator).permutation(n).tolist()
    out, offset = [], 0
    for length in lengths:
        out.append(Subset(dataset, perm[offset : offset + length]))
        offset += length
    return out
