"""Samplers (``torch.utils.data``): which indices, in which order, grouped into which batches.

Random samplers draw from a ``lazyflow.Generator`` (the global one by default, so ``lf.manual_seed``
makes shuffling reproducible): each draw consumes one ``(seed, offset)`` pair of the generator, like one
random op, and seeds a numpy PCG64 stream for the permutation (no device work, no compilation).
A ``numpy.random.Generator`` is accepted too.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Generic, TypeVar, cast

import numpy as np

from ..._creation import Generator, default_generator

__all__ = [
    "Sampler",
    "SequentialSampler",
    "RandomSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
    "BatchSampler",
]

T_co = TypeVar("T_co", covariant=True)


def _rng(generator) -> np.random.Generator:
    """A numpy generator seeded by one draw from ``generator`` (a lazyflow or numpy generator, or None)."""
    if isinstance(generator, np.random.Generator):
        return generator
    if generator is None:
        generator = default_generator
    if not isinstance(generator, Generator):
        raise TypeError(
            f"generator must be a lazyflow.Generator or numpy.random.Generator, got {type(generator).__name__}"
        )
    seed, offset = generator._next()
    return np.random.Generator(np.random.PCG64([int(seed), int(offset), 0x5A4D]))


class Sampler(Generic[T_co]):
    """Base class of samplers: an iterable of indices (or of index lists, for batch samplers)."""

    def __init__(self, data_source: Sized | None = None) -> None:
        pass

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")


class SequentialSampler(Sampler[int]):
    """Indices ``0 .. len(data_source) - 1`` in order.

    Args:
        data_source: the dataset (only its length is used).
    """

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """Random indices: a fresh permutation per epoch, or draws with replacement.

    Args:
        data_source: the dataset (only its length is used).
        replacement: draw with replacement.
        num_samples: number of indices per epoch (default ``len(data_source)``).
        generator: ``lazyflow.Generator`` or ``numpy.random.Generator`` (default: the global generator).
    Raises:
        TypeError: a non-boolean ``replacement``. ValueError: a non-positive ``num_samples``.
    """

    def __init__(
        self, data_source: Sized, replacement: bool = False, num_samples: int | None = None, generator=None
    ) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={self.replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        rng = _rng(self.generator)
        if self.replacement:
            yield from rng.integers(0, n, size=self.num_samples).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from rng.permutation(n).tolist()
        yield from rng.permutation(n)[: self.num_samples % n].tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given indices in a random order, without replacement.

    Args:
        indices: the indices. generator: see ``RandomSampler``.
    """

    def __init__(self, indices: Sequence[int], generator=None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        for i in _rng(self.generator).permutation(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """Indices drawn with probabilities proportional to ``weights``.

    Args:
        weights: one non-negative weight per index. num_samples: draws per epoch.
        replacement: draw with replacement (default True). generator: see ``RandomSampler``.
    Raises:
        ValueError: a non-positive ``num_samples``, or weights that are not a 1-D sequence.
    """

    def __init__(self, weights: Sequence[float], num_samples: int, replacement: bool = True, generator=None) -> None:
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        w = np.asarray(weights, dtype=np.float64)
        if w.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape {tuple(w.shape)}")
        self.weights = w
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        p = self.weights / self.weights.sum()
        yield from _rng(self.generator).choice(len(p), size=self.num_samples, replace=self.replacement, p=p).tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list[int]]):
    """Group the indices of ``sampler`` into lists of ``batch_size``.

    Args:
        sampler: an iterable of indices.
        batch_size: indices per batch (positive).
        drop_last: drop the last, smaller batch.
    Raises:
        ValueError: a non-positive or non-integer ``batch_size``, or a non-boolean ``drop_last``.
    >>> list(BatchSampler(SequentialSampler(range(5)), 2, drop_last=False))
    [[0, 1], [2, 3], [4]]
    """

    def __init__(self, sampler: Sampler[int] | Iterable[int], batch_size: int, drop_last: bool) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        it = iter(self.sampler)
        size = self.batch_size
        while True:
            batch = []
            for idx in it:
                batch.append(idx)
                if len(batch) == size:
                    break
            if len(batch) == size:
                yield batch
                continue
            if batch and not self.drop_last:
                yield batch
            return

    def __len__(self) -> int:
        n = len(cast(Sized, self.sampler))
        return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size
