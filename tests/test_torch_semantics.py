"""Semantics torch users rely on, against torch 2.13: the legacy constructors (``lf.Tensor(2, 3)``,
``lf.FloatTensor``), errors where torch refuses, formatting (``f"{loss:.4f}"``), and float -> integer conversion.
Expressions run with ``m = lazyflow`` and ``m = torch``; those on tensors also inside ``lf.compile``.
"""

from __future__ import annotations

import re

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
    if values:  # exact for integers and conversions; floating arithmetic to float32 rounding
        np.testing.assert_allclose(
            np.asarray(ours.detach().to(lf.float64)),
            theirs.detach().double().numpy(),
            rtol=1e-6 if ours.dtype.is_floating_point else 0,
            atol=0,
            err_msg=where,
        )


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


# ---------------------------------------------------------------- where torch raises, lazyflow raises
def _operands(m):
    return {
        "i": m.tensor([[2, 3], [4, 5]]),
        "f": m.ones(2, 2),
        "d": m.ones(2, 2, dtype=m.float64),
        "b": m.tensor([[True, False], [False, True]]),
        "u": m.tensor([2, 3], dtype=m.uint8),
        "h": m.ones(2, 2, dtype=m.float16),
    }


STRICT = [  # torch raises RuntimeError (or its NotImplementedError subclass); lazyflow DTypeError, a RuntimeError too
    "i ** -1",
    "m.pow(i, -2)",
    "i.pow(exponent=-1)",
    "i.clone().pow_(-1)",
    "b ** -1",
    "u ** -3",
    "i ** np.int64(-1)",
    "i @ f",
    "f @ i",
    "f @ d",
    "h @ f",
    "m.matmul(i[0], f)",
    "m.mm(i, f)",
    "m.dot(i[0], f[0])",
    "m.mv(i, f[0])",
    "m.bmm(i[None], f[None])",
    "m.einsum('ij,jk', i, f)",
    "m.nn.functional.linear(i, f)",
    "m.nn.functional.linear(f, f, d[0])",
    "b @ b",
    "m.softmax(i, 0)",
    "m.log_softmax(i, 1)",
    "i.softmax(0)",
    "m.softmax(b, 0)",
    "m.nn.functional.softmax(i, -1)",
    "m.nn.functional.log_softmax(u, 0)",
    "m.nn.functional.softmin(i, 0)",
]
ALLOWED = [  # the neighbours that torch allows, with torch's results
    "i ** -1.0",
    "i ** 0",
    "i ** 2",
    "i ** m.tensor(-1)",
    "2 ** m.tensor([-1, 1])",
    "i.pow(m.tensor([[-1], [2]]))",
    "f ** -1",
    "i @ i",
    "u @ u",
    "h @ h",
    "m.outer(i[0], f[0])",
    "m.einsum('ij,jk', i, i)",
    "m.softmax(i, 0, dtype=m.float32)",
    "m.log_softmax(i, 1, dtype=m.float64)",
    "m.softmax(h, 0)",
]


@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.parametrize("expr", STRICT)
def test_errors_where_torch_raises(expr, mode):
    with pytest.raises(RuntimeError) as theirs:
        _eval(expr, torch, **_operands(torch))
    ops = _operands(lf)
    with pytest.raises(lf.DTypeError) as ours:
        if mode == "eager":
            _eval(expr, lf, **ops)
        else:
            names = sorted(ops)
            compiled(_strict_fn(expr, names))(*[ops[n] for n in names])
    assert isinstance(ours.value, RuntimeError) and isinstance(ours.value, TypeError), "catchable either way"
    assert isinstance(theirs.value, RuntimeError)
    assert re.search(r"int64|float|bool|uint8|dtype|negative", str(ours.value)), str(ours.value)


_STRICT_FNS: dict = {}


def _strict_fn(expr, names):
    key = (expr, tuple(names))
    if key not in _STRICT_FNS:
        _STRICT_FNS[key] = lambda *ts: _eval(expr, lf, **dict(zip(names, ts)))
    return _STRICT_FNS[key]


@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.parametrize("expr", ALLOWED)
def test_what_torch_allows_next_to_them(expr, mode):
    theirs = _eval(expr, torch, **_operands(torch))
    ops = _operands(lf)
    if mode == "eager":
        ours = _eval(expr, lf, **ops)
    else:
        names = sorted(ops)
        ours = compiled(_strict_fn(expr, names))(*[ops[n] for n in names])
    _same(ours, theirs, f"{expr} [{mode}]")


def test_numpy_of_a_tensor_that_requires_grad_as_torch():
    for m in (lf, torch):
        x = m.ones(2, requires_grad=True)
        for t in (x, x * 2, m.nn.Parameter(m.ones(2))):
            with pytest.raises(RuntimeError, match=r"detach\(\)\.numpy\(\)"):
                t.numpy()
            np.testing.assert_array_equal(t.detach().numpy(), np.asarray(t.detach()))
            np.testing.assert_array_equal(t.numpy(force=True), t.detach().numpy())
        with m.no_grad():  # torch checks grad mode: under no_grad numpy() reads the values
            np.testing.assert_array_equal(x.numpy(), [1.0, 1.0])
            assert not (x * 2).requires_grad
        with m.inference_mode():
            np.testing.assert_array_equal(x.numpy(), [1.0, 1.0])
        assert m.ones(2).numpy().tolist() == [1.0, 1.0] and x.tolist() == [1.0, 1.0]
    with pytest.raises(lf.AutogradError):
        lf.ones(2, requires_grad=True).numpy()


# ---------------------------------------------------------------- formatting
FORMATS = [  # (expression building the tensor, format spec)
    ("m.tensor(2.5)", ".4f"),
    ("m.tensor(2.5)", ""),
    ("m.tensor(2.5)", ">10"),
    ("m.tensor(2.5)", ".3e"),
    ("m.tensor(0.1)", ""),
    ("m.tensor(0.1, dtype=m.float64)", ""),
    ("m.tensor(1e-8)", ".2g"),
    ("m.tensor(2)", ""),
    ("m.tensor(3)", "04d"),
    ("m.tensor(-7)", "+"),
    ("m.tensor(True)", ""),
    ("m.tensor(2.5, dtype=m.bfloat16)", ""),
    ("m.tensor(2.5, dtype=m.float16)", ".1f"),
    ("m.tensor(3, dtype=m.uint8)", "x"),
    ("m.tensor(2.5, requires_grad=True)", ".2f"),
    ("(m.tensor(2.0, requires_grad=True) * 3)", ".1f"),
    ("m.tensor([1, 2])", ""),
    ("m.tensor([[1.5, 2.0]])", ""),
    ("m.zeros(0)", ""),
    ("m.nn.Parameter(m.tensor(2.5))", ""),
    ("m.ones(2).sum()", "8.3f"),
]
FORMAT_ERRORS = [
    ("m.tensor([1.0, 2.0])", ".2f", TypeError),
    ("m.tensor([1.0])", ".2f", TypeError),
    ("m.tensor(3.0)", "04d", ValueError),
    ("m.nn.Parameter(m.tensor(2.5))", ".2f", TypeError),
]


@pytest.mark.parametrize(("expr", "spec"), FORMATS)
def test_format_as_torch(expr, spec):
    theirs = format(_eval(expr, torch), spec)
    assert format(_eval(expr, lf), spec) == theirs.replace("torch.", "lazyflow.")
    assert f"{_eval(expr, lf):{spec}}" == theirs.replace("torch.", "lazyflow.")


@pytest.mark.parametrize(("expr", "spec", "error"), FORMAT_ERRORS)
def test_format_errors_as_torch(expr, spec, error):
    with pytest.raises(error):
        format(_eval(expr, torch), spec)
    with pytest.raises(error):
        format(_eval(expr, lf), spec)


def test_format_of_a_traced_scalar_needs_its_value():
    f = lf.compile(lambda x: f"{x.sum():.4f}" and x)
    with pytest.raises(lf.GraphError, match="item"):
        f(lf.ones(2))


def test_dtype_names_read_like_torch():
    for name in DTYPES + ["half", "float", "double", "long", "int", "short"]:
        ours, theirs = getattr(lf, name), getattr(torch, name)
        for show in (str, repr, lambda d: f"{d}"):
            assert show(ours) == show(theirs).replace("torch.", "lazyflow."), name


# ---------------------------------------------------------------- float -> integer conversion
# finite values a C++ float -> int64 (uint8) or int32 (int8, int16) cast represents: torch's CPU results are defined
FINITE = [
    300.0,
    -1.0,
    256.0,
    255.9,
    -0.5,
    -1.5,
    0.0,
    127.5,
    128.0,
    -128.0,
    -129.0,
    65539.0,
    70000.7,
    -32769.0,
    1e5,
    -2.5e5,
    1e9,
    -2.1e9,
]
WIDE = [2.0**31 + 5, 3e9, 1e10, -1e10, 2.0**40 + 7, -(2.0**40) - 7, 2.0**62]  # inside int64, outside int32
CONVERSIONS = ["x.to(m.{d})", "x.type(m.{d})", "m.zeros(x.shape, dtype=m.{d}).copy_(x)", "x.{method}()"]
METHOD = {"uint8": "byte", "int8": "char", "int16": "short", "int32": "int", "int64": "long", "bool": "bool"}


@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.parametrize("src", ["float64", "float32", "bfloat16", "float16"])
@pytest.mark.parametrize("dst", ["uint8", "int8", "int16", "int32", "int64", "bool"])
def test_float_to_integer_conversion_as_torch(src, dst, mode):
    vals = FINITE + (WIDE if dst in ("uint8", "int64") else [])
    if src == "float16":
        vals = [v for v in vals if abs(v) < 65504]
    for conv in CONVERSIONS:
        expr = conv.format(d=dst, method=METHOD[dst])
        theirs = _eval(expr, torch, x=torch.tensor(vals, dtype=getattr(torch, src)))
        x = lf.tensor(vals, dtype=getattr(lf, src))
        ours = _eval(expr, lf, x=x) if mode == "eager" else compiled(_conversion_fn(expr))(x)
        _same(ours, theirs, f"{expr} from {src} [{mode}]")


_CONVERSION_FNS: dict = {}


def _conversion_fn(expr):
    return _CONVERSION_FNS.setdefault(expr, lambda x: _eval(expr, lf, x=x))


def test_conversion_outside_torchs_defined_range_is_as_documented():
    """NaN, +-inf and values beyond the wide type are undefined behaviour in torch: the README says what lazyflow
    gives (saturate at the wide type, then wrap)."""
    x = lf.tensor([float("nan"), float("inf"), -float("inf"), 1e19, -1e19], dtype=lf.float64)
    assert x.to(lf.uint8).tolist() == [0, 255, 0, 255, 0]
    assert x.byte().tolist() == compiled(lambda t: t.byte())(x).tolist()
    assert x.to(lf.int32).tolist() == [0, 2**31 - 1, -(2**31), 2**31 - 1, -(2**31)]
    assert x.to(lf.int64).tolist() == [0, 2**63 - 1, -(2**63), 2**63 - 1, -(2**63)]
    assert x.to(lf.bool).tolist() == [True] * 5


def test_readme_reading_values_and_shapes():
    """The README's claims: np.asarray reads a tensor that requires grad; a shape is an lf.Size, so lf.Tensor(x.shape)
    allocates that shape as torch.Tensor(x.shape) does, and lf.zeros(x.shape) too."""
    x = lf.ones(2, 3, requires_grad=True)
    np.testing.assert_array_equal(np.asarray(x * 2), np.full((2, 3), 2.0))
    t = torch.ones(2, 3)
    assert lf.Tensor(x.shape).shape == torch.Tensor(t.shape).shape == (2, 3) and lf.zeros(x.shape).shape == (2, 3)


@pytest.mark.parametrize("weight", [0.1, 0.49, 0.5, 0.7, 0.999, 1.0, -0.6, 1.5])
def test_lerp_rounds_as_torch_on_both_sides_of_one_half(weight):
    # torch computes end - (end - start) * (1 - w) for |w| >= 0.5 (exact at w == 1): the same bits, not just close
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(4096).astype(np.float32), rng.standard_normal(4096).astype(np.float32)
    got = lf.lerp(lf.tensor(a), lf.tensor(b), weight).numpy()
    np.testing.assert_array_equal(got, torch.lerp(torch.tensor(a), torch.tensor(b), weight).numpy())
    w = rng.uniform(-1, 2, 4096).astype(np.float32)  # a tensor weight: the branch is chosen per element
    got = lf.lerp(lf.tensor(a), lf.tensor(b), lf.tensor(w)).numpy()
    np.testing.assert_array_equal(got, torch.lerp(torch.tensor(a), torch.tensor(b), torch.tensor(w)).numpy())
