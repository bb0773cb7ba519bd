"""Semantics torch users rely on, against torch 2.13: the legacy constructors (``lf.Tensor(2, 3)``,
``lf.FloatTensor``), errors where torch refuses, formatting (``f"{loss:.4f}"``), and float -> integer conversion.
Expressions run with ``m = lazyflow`` and ``m = torch``; those on tensors also inside ``lf.compile``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import lazyflow as lf
from tests._harness import compiled


def _name(d) -> str:
    return str(d).rsplit(".", 1)[-1]


def _eval(expr, m, **names):
    return eval(expr, {"m": m, "np": np, **names})


def _same(ours, theirs, where, values=True):
    assert isinstance(ours, lf.Tensor), f"{where}: got {type(ours).__name__}"
    assert _name(ours.dtype) == _name(theirs.dtype), f"{where}: {ours.dtype} vs {theirs.dtype}"
    assert ours.shape == tuple(theirs.shape), f"{where}: {ours.shape} vs {tuple(theirs.shape)}"
    if values:
        np.testing.assert_array_equal(np.asarray(ours.detach().to(lf.float64)), theirs.double().numpy(), err_msg=where)


# ---------------------------------------------------------------- legacy constructors
LEGACY_DATA = [
    "m.Tensor()",
    "m.Tensor([1, 2])",
    "m.Tensor([[1, 2], [3, 4]])",
    "m.Tensor([True, False])",
    "m.Tensor((2, 3))",
    "m.Tensor([])",
    "m.Tensor(())",
    "m.Tensor(np.array([1, 2]))",
    "m.Tensor(np.array([1.5, 2.0]))",
    "m.Tensor(np.array(3.0))",
    "m.Tensor(m.tensor([1, 2]))",
    "m.Tensor(m.tensor([1.0, 2.0], dtype=m.float64))",
    "m.Tensor(data=[1, 2])",
    "m.Tensor([1], device='cpu')",
    "m.Tensor(0)",
    "m.FloatTensor([1, 2])",
    "m.DoubleTensor([1, 2])",
    "m.HalfTensor([1.5, 2])",
    "m.BFloat16Tensor([1.5, 2])",
    "m.LongTensor([1.7, -2.7])",
    "m.LongTensor(np.array([1.7, -2.2]))",
    "m.IntTensor([1.5, -3])",
    "m.ShortTensor([7, -7])",
    "m.CharTensor([1, -2])",
    "m.ByteTensor([1.5, 200])",
    "m.BoolTensor([1, 0, 2])",
    "m.BoolTensor([0.5, 0.0])",
    "m.DoubleTensor()",
    "m.LongTensor((2, 3))",
    "m.FloatTensor(m.tensor([1.0, 2.0]))",
    "m.LongTensor(m.tensor([1, 2]))",
]
# sizes: torch's memory is uninitialised (compared by dtype and shape); lazyflow's is zeros
LEGACY_SIZES = [
    "m.Tensor(2, 3)",
    "m.Tensor(2)",
    "m.Tensor(np.int64(3))",
    "m.Tensor(size=(2, 3))",
    "m.Tensor(2, 3, device='cpu')",
    "m.FloatTensor(2)",
    "m.LongTensor(3)",
    "m.LongTensor(2, 3)",
    "m.BoolTensor(2)",
    "m.ShortTensor(2)",
    "m.DoubleTensor(2)",
    "m.ByteTensor(1, 2)",
    "m.FloatTensor(size=(2,))",
    "m.HalfTensor(2, 2)",
]
LEGACY_TYPE_ERRORS = [
    "m.Tensor(2.5)",
    "m.Tensor(True)",
    "m.Tensor(np.float64(2.0))",
    "m.Tensor(2, 3.0)",
    "m.Tensor([1, 2], [3])",
    "m.Tensor([1, 2], dtype=m.float64)",
    "m.Tensor([1], requires_grad=True)",
    "m.LongTensor(m.tensor([1.0, 2.0]))",
    "m.FloatTensor(m.tensor([1.0], dtype=m.float64))",
]


@pytest.mark.parametrize("expr", LEGACY_DATA)
def test_legacy_constructor_from_data_matches_torch(expr):
    _same(_eval(expr, lf), _eval(expr, torch), expr)


@pytest.mark.parametrize("expr", LEGACY_SIZES)
def test_legacy_constructor_from_sizes_gives_zeros(expr):
    ours, theirs = _eval(expr, lf), _eval(expr, torch)
    _same(ours, theirs, expr, values=False)
    assert not np.asarray(ours).any(), f"{expr}: lazyflow documents zeros for torch's uninitialised memory"
    if not expr.startswith("m.Tensor("):
        assert ours.device.type == "cpu", "the typed constructors build CPU tensors, as torch's do"


@pytest.mark.parametrize("expr", LEGACY_TYPE_ERRORS)
def test_legacy_constructor_type_errors_like_torch(expr):
    with pytest.raises(TypeError):
        _eval(expr, torch)
    with pytest.raises(TypeError):
        _eval(expr, lf)


def test_legacy_constructor_of_a_tensor_keeps_autograd_like_torch_alias():
    ours, theirs = lf.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    a, b = lf.Tensor(ours), torch.Tensor(theirs)
    assert a.requires_grad and b.requires_grad
    (a * 3).sum().backward()
    (b * 3).sum().backward()
    np.testing.assert_array_equal(np.asarray(ours.grad), theirs.grad.numpy())
    with pytest.raises(RuntimeError):
        torch.Tensor(torch.ones(2), device="cpu")
    with pytest.raises(RuntimeError):
        lf.Tensor(lf.ones(2), device="cpu")


def test_legacy_constructor_follows_the_default_dtype():
    try:
        for m in (lf, torch):
            m.set_default_dtype(m.float64)
        for expr in ("m.Tensor([1, 2])", "m.Tensor(2)", "m.FloatTensor([1])"):
            _same(_eval(expr, lf), _eval(expr, torch), expr, values=False)
        assert isinstance(lf.zeros(2), lf.DoubleTensor) == isinstance(torch.zeros(2), torch.DoubleTensor)
    finally:
        for m in (lf, torch):
            m.set_default_dtype(m.float32)


TYPES = [
    "FloatTensor",
    "DoubleTensor",
    "HalfTensor",
    "BFloat16Tensor",
    "LongTensor",
    "IntTensor",
    "ShortTensor",
    "CharTensor",
    "ByteTensor",
    "BoolTensor",
]
DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"]


def test_isinstance_of_tensor_types_as_torch_answers():
    for dt in DTYPES:
        x, y = lf.zeros(2, dtype=getattr(lf, dt)), torch.zeros(2, dtype=getattr(torch, dt))
        for tt in TYPES:
            assert isinstance(x, getattr(lf, tt)) == isinstance(y, getattr(torch, tt)), (dt, tt)
        assert isinstance(x, lf.Tensor)
    p, q = lf.nn.Parameter(lf.zeros(2)), torch.nn.Parameter(torch.zeros(2))
    assert isinstance(p, lf.FloatTensor) == isinstance(q, torch.FloatTensor) is True
    for m in (lf, torch):
        assert not isinstance(3.0, m.FloatTensor)
        assert not issubclass(m.FloatTensor, m.Tensor)
        assert m.FloatTensor.dtype is m.float32 and m.FloatTensor.is_cuda is False
    assert repr(lf.LongTensor) == repr(torch.LongTensor).replace("torch", "lazyflow")
    assert lf.FloatTensor.__name__ == "FloatTensor" and lf.FloatTensor.__module__ == "lazyflow"


def test_type_names_and_conversions_as_torch():
    for dt in DTYPES:
        x, y = lf.zeros(2, dtype=getattr(lf, dt)), torch.zeros(2, dtype=getattr(torch, dt))
        assert x.type() == y.type().replace("torch.", "lazyflow."), dt
        for tt in TYPES:
            _same(x.type(getattr(lf, tt)), y.type(getattr(torch, tt)), f"{dt}.type({tt})")
            _same(x.type(f"lazyflow.{tt}"), y.type(f"torch.{tt}"), f"{dt}.type('{tt}')")
        _same(x.type(lf.int16), y.type(torch.int16), dt)
        _same(x.type(dtype=lf.Tensor), y.type(dtype=torch.Tensor), dt)
    for bad in ("lazyflow.float32", "torch.int32", "FloatTensor", "lazyflow.NoTensor"):
        with pytest.raises(ValueError):
            torch.zeros(2).type(bad.replace("lazyflow.", "torch."))
        with pytest.raises(ValueError, match="invalid type"):
            lf.zeros(2).type(bad)


def test_legacy_types_in_graph_mode():
    def f(x):
        return x.type(lf.DoubleTensor) + lf.Tensor([1, 2]).double(), isinstance(x, lf.FloatTensor), x.type()

    eager = f(lf.ones(2))
    out = compiled(lambda x: f(x)[0])(lf.ones(2))
    _same(out, torch.ones(2).type(torch.DoubleTensor) + torch.Tensor([1, 2]).double(), "graph")
    _same(eager[0], torch.ones(2).double() + torch.Tensor([1, 2]).double(), "eager")
    seen = []
    compiled(lambda x: seen.append((isinstance(x, lf.FloatTensor), x.type())) or x)(lf.ones(2))
    assert seen == [(True, "lazyflow.FloatTensor")] == [eager[1:]]
