"""``lf.Size`` against ``torch.Size``: the same type behaviour for the things training code does with a shape."""

import pickle

import numpy as np
import pytest
import torch

import lazyflow as lf

OPS = {
    "itself": lambda s: s,
    "slice": lambda s: s[1:],
    "neg_slice": lambda s: s[:-1],
    "index": lambda s: s[-1],
    "add_tuple": lambda s: s + (5,),
    "radd_tuple": lambda s: (7,) + s,
    "mul": lambda s: s * 2,
    "numel": lambda s: s.numel(),
    "len": lambda s: len(s),
    "eq_tuple": lambda s: s == (2, 3, 4),
    "eq_list": lambda s: s == [2, 3, 4],
    "unpack": lambda s: tuple(x * 2 for x in s),
    "count": lambda s: s.count(3),
    "empty_numel": lambda s: s[:0].numel(),
}


def _kind(v):
    if isinstance(v, torch.Size):
        return ("Size", tuple(v))
    if isinstance(v, lf.Size):
        return ("Size", tuple(v))
    return (type(v).__name__, v)


@pytest.mark.parametrize("name", list(OPS))
def test_size_behaves_like_torch_size(name):
    t = torch.zeros(2, 3, 4).shape
    s = lf.zeros(2, 3, 4).shape
    assert _kind(OPS[name](s)) == _kind(OPS[name](t))


def test_shape_and_size_are_sizes_everywhere():
    x = lf.ones(2, 3)
    for s in (x.shape, x.size(), (x + 1).shape, x.reshape(3, 2).shape, x.sum(0).shape, lf.tensor(1.0).shape):
        assert isinstance(s, lf.Size) and isinstance(s, tuple)
    assert x.size(1) == 3 and type(x.size(1)) is int
    assert hash(x.shape) == hash((2, 3)) and {x.shape: 1}[(2, 3)] == 1
    assert repr(x.shape) == repr(torch.ones(2, 3).shape).replace("torch", "lazyflow")


def test_size_round_trips_and_builds_tensors_like_torch():
    s = lf.Size([2, np.int64(3), lf.tensor(4)])
    assert s == (2, 3, 4) and isinstance(pickle.loads(pickle.dumps(s)), lf.Size)
    assert lf.Tensor(s).shape == tuple(torch.Tensor(torch.Size([2, 3, 4])).shape)
    assert lf.zeros(s).shape == s and lf.ones(2, 3).view(s[:1] + (3,)).shape == (2, 3)
    # a plain tuple still means data to the legacy constructor, as in torch
    assert lf.Tensor((2, 3)).tolist() == torch.Tensor((2, 3)).tolist()


def test_size_bad_input_like_torch():
    with pytest.raises(TypeError):
        torch.Size(["a"])
    with pytest.raises(TypeError, match="iterable of ints"):
        lf.Size(["a"])
    with pytest.raises(TypeError):
        lf.Size([2.5])
