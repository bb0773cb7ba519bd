"""lf.utils.data.DistributedSampler against torch.utils.data.DistributedSampler (the oracle): the same indices for
every rank, world size, seed, epoch, shuffle and drop_last, including padding by repetition."""

import itertools

import numpy as np
import pytest
import torch
from torch.utils.data import DistributedSampler as TorchSampler

import lazyflow as lf
from lazyflow.utils.data import DataLoader, DistributedSampler, TensorDataset
from lazyflow.utils.data.distributed import torch_randperm


class Sized:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


@pytest.mark.parametrize("n", [0, 1, 2, 7, 10, 33, 1000])
@pytest.mark.parametrize("world", [1, 2, 3, 4, 8])
def test_same_indices_as_torch(n, world):
    for shuffle, drop_last, seed, epoch in itertools.product([True, False], [True, False], [0, 17], [0, 3]):
        for rank in range(world):
            kw = dict(num_replicas=world, rank=rank, shuffle=shuffle, seed=seed, drop_last=drop_last)
            mine, ref = DistributedSampler(Sized(n), **kw), TorchSampler(Sized(n), **kw)
            mine.set_epoch(epoch)
            ref.set_epoch(epoch)
            assert list(mine) == list(ref), (n, world, rank, shuffle, drop_last, seed, epoch)
            assert len(mine) == len(ref) == len(list(mine))
            assert (mine.num_samples, mine.total_size) == (ref.num_samples, ref.total_size)


@pytest.mark.parametrize("seed", [0, 1, 2**31 - 1, 2**32, 2**32 + 5, 2**40 + 3, 2**63 - 1, -1])
def test_torch_randperm_stream(seed):
    for n in (2, 5, 100, 4097):
        g = torch.Generator()
        g.manual_seed(seed)
        assert torch_randperm(n, seed) == torch.randperm(n, generator=g).tolist(), (seed, n)


def test_padding_repeats_indices_when_world_exceeds_dataset():
    # 2 items over 5 ranks: the permutation is repeated (torch's indices * ceil(pad / n) branch)
    got = [list(DistributedSampler(Sized(2), num_replicas=5, rank=r, shuffle=False)) for r in range(5)]
    assert got == [[0], [1], [0], [1], [0]]


def test_epochs_reshuffle_and_ranks_partition():
    s = [DistributedSampler(Sized(12), num_replicas=3, rank=r, seed=5) for r in range(3)]
    e0 = [list(x) for x in s]
    assert sorted(sum(e0, [])) == list(range(12))
    for x in s:
        x.set_epoch(1)
    e1 = [list(x) for x in s]
    assert e1 != e0 and sorted(sum(e1, [])) == list(range(12))


def test_defaults_without_process_group_and_with_dataloader():
    ds = TensorDataset(lf.tensor(np.arange(10, dtype=np.float32)))
    s = DistributedSampler(ds, shuffle=False)
    assert (s.num_replicas, s.rank) == (1, 0) and list(s) == list(range(10))
    s = DistributedSampler(ds, num_replicas=2, rank=1, seed=3)
    batches = [b[0].tolist() for b in DataLoader(ds, batch_size=2, sampler=s)]
    ref = list(TorchSampler(Sized(10), num_replicas=2, rank=1, seed=3))
    assert sum(batches, []) == [float(i) for i in ref]


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"Invalid rank 2, rank should be in the interval \[0, 1\]"):
        DistributedSampler(Sized(4), num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="Invalid rank -1"):
        DistributedSampler(Sized(4), num_replicas=2, rank=-1)
    with pytest.raises(ValueError, match="num_replicas must be at least 1"):
        DistributedSampler(Sized(4), num_replicas=0, rank=0)
