"""``DistributedSampler``: each rank's share of a dataset, with torch's exact index assignment.

torch shuffles with ``torch.randperm(n, generator=g)`` where ``g`` is a CPU generator seeded ``seed + epoch``:
a Fisher-Yates pass over ``0..n-1`` that swaps item ``i`` with item ``i + mt() % (n - i)``, ``mt()`` being the
32-bit outputs of the Mersenne Twister (MT19937) seeded with the low 32 bits of the seed. numpy ships the same
MT19937; it is given the state torch's seeding produces, so the permutation is torch's without importing torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sized

import numpy as np

from ...distributed.process_group import get_rank, get_world_size
from .sampler import Sampler

__all__ = ["DistributedSampler"]


def _mt19937(seed: int) -> np.random.MT19937:
    """numpy's MT19937 in the state of torch's CPU generator after ``manual_seed(seed)`` (init_genrand)."""
    key = np.empty(624, np.uint32)
    x = seed & 0xFFFFFFFF
    key[0] = x
    for j in range(1, 624):
        x = (1812433253 * (x ^ (x >> 30)) + j) & 0xFFFFFFFF
        key[j] = x
    bg = np.random.MT19937()
    bg.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": 624}}
    return bg


def torch_randperm(n: int, seed: int) -> list[int]:
    """``torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()`` (CPU), computed with numpy."""
    m = max(n - 1, 0)
    z = _mt19937(seed % 2**64).random_raw(m).astype(np.int64) % (n - np.arange(m, dtype=np.int64))
    r = list(range(n))
    for i, zi in enumerate(z.tolist()):
        j = zi + i
        r[i], r[j] = r[j], r[i]
    return r


class DistributedSampler(Sampler[int]):
    """The indices of one rank's share of ``dataset`` (torch.utils.data.DistributedSampler, same indices).

    Each epoch every rank draws the same permutation (seeded ``seed + epoch``; call :meth:`set_epoch` before each
    epoch to reshuffle), pads it by repeating its first indices to a multiple of ``num_replicas`` (or drops the
    tail with ``drop_last``), and takes every ``num_replicas``-th index starting at ``rank``.

    Args:
        dataset: a sized dataset (only its length is used).
        num_replicas: number of ranks (default: ``lf.distributed.get_world_size()``, 1 without a process group).
        rank: this rank (default: ``lf.distributed.get_rank()``).
        shuffle: permute the indices (torch's permutation for the seed) or keep them in order.
        seed: the shuffle seed, the same on every rank.
        drop_last: drop the tail so that every rank gets the same number of indices, instead of padding.
    Raises:
        ValueError: ``rank`` outside ``[0, num_replicas - 1]``, or ``num_replicas`` below 1.

    >>> sampler = DistributedSampler(ds, num_replicas=2, rank=0, seed=1)
    >>> loader = DataLoader(ds, batch_size=8, sampler=sampler)
    >>> for epoch in range(3):
    ...     sampler.set_epoch(epoch)
    """

    def __init__(
        self,
        dataset: Sized,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        num_replicas = get_world_size() if num_replicas is None else int(num_replicas)
        rank = get_rank() if rank is None else int(rank)
        if num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be at least 1, got {num_replicas}")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        indices = torch_randperm(n, self.seed + self.epoch) if self.shuffle else list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad <= len(indices):
                indices += indices[:pad]
            elif indices:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        else:
            indices = indices[: self.total_size]
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Use ``seed + epoch`` for the next permutation (call it at the start of each epoch, on every rank)."""
        self.epoch = epoch
