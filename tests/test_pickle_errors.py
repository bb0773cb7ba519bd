"""Pickle round trips (tensors, dtypes, devices) and bad input for every op family: each raises a lazyflow error
class that subclasses the matching builtin, with a message naming the op and the offending shapes/values."""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import lazyflow as lf

DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"]


# ---------------------------------------------------------------- pickle
@pytest.mark.parametrize("name", DTYPES)
def test_tensor_pickle_round_trip(name):
    d = getattr(lf, name)
    x = lf.tensor(np.arange(-3, 3).reshape(2, 3) % (2 if name == "bool" else 7), dtype=d)
    if d.is_floating_point:
        x = (x / 4).to(d).requires_grad_()
    y = pickle.loads(pickle.dumps(x))
    assert isinstance(y, lf.Tensor) and y is not x
    assert y.dtype is d and y.shape == x.shape and y.requires_grad == d.is_floating_point and y.is_leaf
    np.testing.assert_array_equal(np.asarray(y.to(lf.float64)), np.asarray(x.to(lf.float64)))
    if d.is_floating_point:  # the copy is a working leaf of its own
        (y * 2).sum().backward()
        np.testing.assert_array_equal(np.asarray(y.grad.to(lf.float64)), np.full((2, 3), 2.0))
        assert x.grad is None


def test_pickle_of_0d_empty_and_nested_tensors():
    objs = {"scalar": lf.tensor(2.5), "empty": lf.zeros(0, 3, dtype=lf.int64), "list": [lf.ones(2), lf.arange(3)]}
    back = pickle.loads(pickle.dumps(objs, protocol=pickle.HIGHEST_PROTOCOL))
    assert back["scalar"].shape == () and back["scalar"].item() == 2.5
    assert back["empty"].shape == (0, 3) and back["empty"].dtype is lf.int64
    assert back["list"][1].tolist() == [0, 1, 2]
    assert not pickle.loads(pickle.dumps(lf.ones(2))).requires_grad


@pytest.mark.parametrize("name", DTYPES + ["long", "int", "short", "float", "double", "half"])
def test_dtype_pickle_preserves_identity(name):
    d = getattr(lf, name)
    assert pickle.loads(pickle.dumps(d)) is d
    assert copy.deepcopy(d) is d and copy.copy(d) is d


@pytest.mark.parametrize("spec", ["cpu", "cuda", "cuda:1", "tpu:0"])
def test_device_pickle_round_trip(spec):
    d = lf.device(spec)
    e = pickle.loads(pickle.dumps(d))
    assert e == d and repr(e) == repr(d) and hash(e) == hash(d)


def test_deepcopy_and_pickle_of_traced_tensor():
    x = lf.tensor([1.0, 2.0], requires_grad=True)
    y = copy.deepcopy(x)
    assert y is not x and y.requires_grad and y.tolist() == [1.0, 2.0]

    def f(t):
        pickle.dumps(t)
        return t

    with pytest.raises(lf.GraphError, match="pickle"):
        lf.compile(f)(lf.ones(2))


# ---------------------------------------------------------------- bad input, family by family
a23, a4 = lf.ones(2, 3), lf.ones(4)
i2 = lf.tensor([0, 1])

BAD = [
    # elementwise / broadcasting
    ("add shapes", lambda: a23 + a4, lf.ShapeError, ValueError, [r"add", r"\[2, 3\]", r"\[4\]"]),
    ("mul shapes", lambda: lf.mul(a23, lf.ones(3, 2)), lf.ShapeError, ValueError, [r"mul", r"\[3, 2\]"]),
    ("where shapes", lambda: lf.where(lf.ones(5) > 0, a23, 0.0), lf.ShapeError, ValueError, [r"where", r"\[5\]"]),
    ("bitwise float", lambda: lf.bitwise_and(a23, a23), lf.DTypeError, TypeError, [r"bitwise_and", r"float32"]),
    ("sub bool", lambda: lf.tensor([True]) - lf.tensor([False]), lf.DTypeError, TypeError, [r"sub", r"bool"]),
    ("gelu mode", lambda: lf.gelu(a23, approximate="fast"), lf.OpError, RuntimeError, [r"gelu", r"'fast'"]),
    ("div mode", lambda: lf.div(a23, 2, rounding_mode="up"), lf.OpError, RuntimeError, [r"rounding_mode", r"'up'"]),
    ("clamp none", lambda: lf.clamp(a23), lf.OpError, RuntimeError, [r"clamp"]),
    # linear algebra
    ("matmul inner", lambda: a23 @ a23, lf.ShapeError, ValueError, [r"matmul", r"\[2, 3\] and \[2, 3\]", r"3 != 2"]),
    ("matmul 0-d", lambda: lf.matmul(lf.tensor(1.0), a4), lf.ShapeError, ValueError, [r"matmul", r"\[\]"]),
    (
        "matmul batch",
        lambda: lf.ones(2, 3, 4) @ lf.ones(3, 4, 5),
        lf.ShapeError,
        ValueError,
        [r"batch", r"\[2, 3, 4\]", r"\[3, 4, 5\]"],
    ),
    ("mm rank", lambda: lf.mm(a4, a23), lf.ShapeError, ValueError, [r"mm", r"\[4\]"]),
    (
        "bmm batch",
        lambda: lf.bmm(lf.ones(2, 3, 4), lf.ones(3, 4, 5)),
        lf.ShapeError,
        ValueError,
        [r"bmm", r"\[2, 3, 4\]"],
    ),
    ("einsum sizes", lambda: lf.einsum("ij,jk->ik", a23, a23), lf.ShapeError, ValueError, [r"einsum", r"ij,jk"]),
    # reductions
    ("sum dim", lambda: a23.sum(2), lf.IndexOutOfRangeError, IndexError, [r"\[-2, 1\]", r"got 2"]),
    ("softmax dim", lambda: a23.softmax(-3), lf.IndexOutOfRangeError, IndexError, [r"got -3"]),
    ("mean int", lambda: lf.arange(3).mean(), lf.DTypeError, TypeError, [r"mean", r"int64"]),
    ("var int", lambda: lf.arange(3).var(), lf.DTypeError, TypeError, [r"var", r"int64"]),
    ("repeated dim", lambda: a23.sum((0, 0)), lf.OpError, RuntimeError, [r"\(0, 0\)", r"multiple"]),
    ("norm p", lambda: a23.norm(p="nuc"), lf.OpError, RuntimeError, [r"norm", r"'nuc'"]),
    ("max empty", lambda: lf.zeros(2, 0).max(1), lf.IndexOutOfRangeError, IndexError, [r"size 0", r"\[2, 0\]"]),
    # shape ops
    ("reshape", lambda: a23.reshape(4, 2), lf.ShapeError, ValueError, [r"reshape", r"\[4, 2\]", r"size 6"]),
    ("view -1 -1", lambda: a23.view(-1, -1), lf.ShapeError, ValueError, [r"only one dimension"]),
    ("permute", lambda: a23.permute(0), lf.ShapeError, ValueError, [r"permute", r"\[2, 3\]"]),
    ("expand", lambda: a23.expand(3, 4), lf.ShapeError, ValueError, [r"expand", r"\[3, 4\]", r"\[2, 3\]"]),
    ("expand lead -1", lambda: a23.expand(-1, 2, 3), lf.ShapeError, ValueError, [r"-1", r"leading"]),
    ("repeat negative", lambda: a23.repeat(-1, 1), lf.ShapeError, ValueError, [r"repeat", r"\[-1, 1\]"]),
    ("cat", lambda: lf.cat([a23, a4]), lf.ShapeError, ValueError, [r"cat", r"\[\[2, 3\], \[4\]\]"]),
    ("cat empty", lambda: lf.cat([]), lf.OpError, RuntimeError, [r"cat", r"non-empty"]),
    ("stack", lambda: lf.stack([a23, a23.t()]), lf.ShapeError, ValueError, [r"stack", r"\[3, 2\]"]),
    ("split sizes", lambda: a23.split([1, 1], 1), lf.ShapeError, ValueError, [r"split", r"\[1, 1\]", r"3"]),
    ("chunk 0", lambda: a23.chunk(0), lf.OpError, RuntimeError, [r"chunk", r"got: 0"]),
    ("flatten", lambda: a23.flatten(1, 0), lf.OpError, RuntimeError, [r"flatten", r"start_dim 1"]),
    ("unsqueeze dim", lambda: a23.unsqueeze(4), lf.IndexOutOfRangeError, IndexError, [r"\[-3, 2\]", r"got 4"]),
    ("tril 1-d", lambda: a4.tril(), lf.ShapeError, ValueError, [r"tril", r"\[4\]"]),
    ("pad odd", lambda: lf.pad(a23, (1,)), lf.ShapeError, ValueError, [r"pad", r"\[2, 3\]"]),
    ("pad reflect", lambda: lf.pad(a23, (3, 0), mode="reflect"), lf.ShapeError, ValueError, [r"reflect", r"size 3"]),
    ("pad mode", lambda: lf.pad(a23, (1, 1), mode="mirror"), lf.OpError, RuntimeError, [r"pad", r"'mirror'"]),
    # gather/scatter/index
    (
        "gather oob",
        lambda: a23.gather(1, lf.tensor([[0, 5]])),
        lf.IndexOutOfRangeError,
        IndexError,
        [r"gather", r"index 5", r"size 3"],
    ),
    ("gather neg", lambda: a23.gather(1, lf.tensor([[-1]])), lf.IndexOutOfRangeError, IndexError, [r"index -1"]),
    ("gather rank", lambda: a23.gather(1, i2), lf.ShapeError, ValueError, [r"gather", r"\[2\]", r"\[2, 3\]"]),
    ("gather dtype", lambda: a23.gather(1, lf.tensor([[0.5]])), lf.DTypeError, TypeError, [r"gather", r"float32"]),
    (
        "scatter oob",
        lambda: a23.scatter(1, lf.tensor([[7]]), 1.0),
        lf.IndexOutOfRangeError,
        IndexError,
        [r"scatter", r"index 7"],
    ),
    (
        "scatter reduce",
        lambda: a23.scatter(1, lf.tensor([[0]]), 1.0, reduce="max"),
        lf.OpError,
        RuntimeError,
        [r"scatter", r"'max'"],
    ),
    (
        "index_select oob",
        lambda: a23.index_select(1, lf.tensor([3])),
        lf.IndexOutOfRangeError,
        IndexError,
        [r"index_select", r"index 3", r"size 3"],
    ),
    (
        "index_add shape",
        lambda: a23.index_add(1, i2, lf.ones(2, 3)),
        lf.ShapeError,
        ValueError,
        [r"index_add", r"\[2, 3\]", r"\[2, 2\]"],
    ),
    ("masked_fill mask", lambda: a23.masked_fill(a23, 1.0), lf.DTypeError, TypeError, [r"masked_fill", r"float32"]),
    (
        "masked_fill shape",
        lambda: a23.masked_fill(lf.ones(5) > 0, 1.0),
        lf.ShapeError,
        ValueError,
        [r"masked_fill", r"\[5\]"],
    ),
    ("topk k", lambda: a23.topk(5), lf.IndexOutOfRangeError, IndexError, [r"topk", r"k \(5\)", r"size 3"]),
    (
        "one_hot class",
        lambda: lf.one_hot(lf.tensor([3]), 3),
        lf.IndexOutOfRangeError,
        IndexError,
        [r"one_hot", r"index 3"],
    ),
    ("one_hot float", lambda: lf.one_hot(lf.tensor([1.0]), 3), lf.DTypeError, TypeError, [r"one_hot", r"float32"]),
    # creation / conversion
    ("ragged", lambda: lf.tensor([[1, 2], [3]]), lf.ShapeError, ValueError, [r"rectangular", r"\(1,\)", r"\(2,\)"]),
    ("bad dtype name", lambda: lf.ones(2, dtype="float8"), lf.DTypeError, TypeError, [r"'float8'"]),
    ("string data", lambda: lf.tensor("abc"), lf.DTypeError, TypeError, [r"str"]),
    ("negative size", lambda: lf.zeros(2, -1), lf.ShapeError, ValueError, [r"non-negative", r"-1"]),
    ("arange step", lambda: lf.arange(0, 1, 0), lf.OpError, RuntimeError, [r"arange", r"step"]),
    ("arange sign", lambda: lf.arange(0, 5, -1), lf.OpError, RuntimeError, [r"arange", r"step=-1"]),
    ("linspace steps", lambda: lf.linspace(0, 1, -1), lf.OpError, RuntimeError, [r"linspace", r"-1"]),
    ("eye", lambda: lf.eye(-2), lf.ShapeError, ValueError, [r"eye", r"n=-2"]),
    ("int requires grad", lambda: lf.tensor([1]).requires_grad_(), lf.DTypeError, TypeError, [r"floating", r"int64"]),
    ("device", lambda: lf.device("tpx"), lf.DeviceError, RuntimeError, [r"'tpx'"]),
    ("to kwargs", lambda: a23.to(dtype="float99"), lf.DTypeError, TypeError, [r"'float99'"]),
    # in-place
    (
        "inplace shape",
        lambda: a4.clone().add_(a23.reshape(3, 2)[:, :1].expand(3, 4)),
        lf.ShapeError,
        ValueError,
        [r"add_", r"\[4\]", r"\[3, 4\]"],
    ),
    ("inplace dtype", lambda: lf.arange(3).add_(0.5), lf.DTypeError, TypeError, [r"add_", r"float32", r"int64"]),
    ("fill_ shape", lambda: a23.clone().fill_(a4), lf.ShapeError, ValueError, [r"fill_", r"\[4\]"]),
    ("copy_ shape", lambda: a23.clone().copy_(a4), lf.ShapeError, ValueError, [r"copy_", r"\[4\]", r"\[2, 3\]"]),
    # autograd
    (
        "backward non-scalar",
        lambda: (lf.ones(2, requires_grad=True) * 2).backward(),
        lf.AutogradError,
        RuntimeError,
        [r"scalar", r"\[2\]"],
    ),
    (
        "backward no grad",
        lambda: lf.ones(2).sum().backward(),
        lf.AutogradError,
        RuntimeError,
        [r"does not require grad"],
    ),
    ("inplace leaf", lambda: lf.ones(2, requires_grad=True).mul_(2), lf.AutogradError, RuntimeError, [r"leaf", r"mul"]),
    (
        "grad shape",
        lambda: (lf.ones(2, requires_grad=True) * 2).backward(lf.ones(3)),
        lf.AutogradError,
        RuntimeError,
        [r"\[3\]", r"\[2\]"],
    ),
]


@pytest.mark.parametrize(("name", "call", "exc", "builtin", "patterns"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_raises_named_lazyflow_error(name, call, exc, builtin, patterns):
    with pytest.raises(exc) as info:
        call()
    e = info.value
    assert isinstance(e, lf.LazyflowError) and isinstance(e, builtin), f"{name}: {type(e).__mro__}"
    msg = str(e)
    for p in patterns:
        assert __import__("re").search(p, msg), f"{name}: {p!r} not in {msg!r}"
    assert "Traceback" not in msg and len(msg.splitlines()) <= 2


def test_second_backward_through_freed_graph():
    x = lf.ones(2, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(lf.AutogradError, match="second time"):
        y.backward()


def test_64_bit_requests_are_refused_not_downgraded_without_x64():
    """With LAZYFLOW_X64=0 (JAX's x64 off) an explicit float64/int64 raises DTypeError; defaults become 32-bit."""
    code = (
        "import lazyflow as lf\n"
        "assert lf.arange(3).dtype is lf.int32 and lf.tensor([1]).dtype is lf.int32\n"
        "assert lf.tensor([1.5]).dtype is lf.float32\n"
        "for make in (lambda: lf.zeros(2, dtype=lf.float64), lambda: lf.tensor([1], dtype=lf.int64),\n"
        "             lambda: lf.ones(2).to(lf.float64)):\n"
        "    try:\n"
        "        make()\n"
        "    except lf.DTypeError as e:\n"
        "        assert '64-bit' in str(e), e\n"
        "    else:\n"
        "        raise SystemExit('a 64-bit dtype was accepted with x64 off')\n"
        "print('ok')\n"
    )
    env = dict(os.environ, LAZYFLOW_X64="0", JAX_PLATFORMS="cpu")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
