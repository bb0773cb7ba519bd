"""The Tensor API against torch: creation, attributes, conversions, dtypes, devices, printing, operators,
reflected and in-place forms. Each check runs the same expression with ``m = lazyflow`` and ``m = torch``.
"""

from __future__ import annotations

import builtins

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import lazyflow as lf


def _name(d) -> str:
    return str(d).rsplit(".", 1)[-1]


def _same(a, b, where=""):
    """A lazyflow result equals a torch result: tensors by dtype name, shape and values; others by value."""
    if isinstance(b, torch.Tensor):
        assert isinstance(a, lf.Tensor), f"{where}: got {type(a).__name__}"
        assert _name(a.dtype) == _name(b.dtype), f"{where}: dtype {a.dtype} vs {b.dtype}"
        assert a.shape == tuple(b.shape), f"{where}: shape {a.shape} vs {tuple(b.shape)}"
        np.testing.assert_allclose(
            np.asarray(a.to(lf.float64)), b.to(torch.float64).numpy(), rtol=1e-6, atol=1e-7, err_msg=where
        )
    elif isinstance(b, torch.Size):
        assert a == tuple(b), where
    elif isinstance(b, (tuple, list)):
        assert len(a) == len(b), where
        for x, y in zip(a, b):
            _same(x, y, where)
    elif isinstance(b, torch.dtype):
        assert _name(a) == _name(b), where
    else:
        assert a == b and type(a) is type(b), f"{where}: {a!r} ({type(a).__name__}) vs {b!r} ({type(b).__name__})"


def _both(expr):
    return eval(expr, {"m": lf, "np": np}), eval(expr, {"m": torch, "np": np})


CREATION = [
    "m.tensor([1, 2, 3])",
    "m.tensor([1.0, 2])",
    "m.tensor(3.5)",
    "m.tensor(True)",
    "m.tensor([[True], [False]])",
    "m.tensor([1, 2], dtype=m.float64)",
    "m.tensor([1.5, 2], dtype=m.float16)",
    "m.tensor([1.5, 2], dtype=m.bfloat16)",
    "m.tensor([1, -2], dtype=m.int8)",
    "m.tensor([1, 200], dtype=m.uint8)",
    "m.tensor([])",
    "m.tensor(np.float64(2))",
    "m.tensor(np.arange(3, dtype=np.int32))",
    "m.tensor([np.float32(1), 2])",
    "m.tensor([[1, 2], [3, 4]]).T",
    "m.zeros(2, 3)",
    "m.zeros((2, 3))",
    "m.zeros([2])",
    "m.zeros(0, 3)",
    "m.ones(2, dtype=m.int16)",
    "m.ones(())",
    "m.full((2, 2), 7)",
    "m.full((2,), 1.5)",
    "m.full((2,), True)",
    "m.full([1, 2], 3, dtype=m.float64)",
    "m.empty(2, 3).shape",
    "m.arange(5)",
    "m.arange(1, 4, 0.5)",
    "m.arange(0, 1, 0.25, dtype=m.float64)",
    "m.arange(10, 0, -3)",
    "m.arange(5.0)",
    "m.arange(m.tensor(3))",
    "m.linspace(0, 1, 5)",
    "m.linspace(0, 1, 1)",
    "m.linspace(-1, 1, 4, dtype=m.float64)",
    "m.eye(3)",
    "m.eye(2, 3, dtype=m.int64)",
    "m.zeros_like(m.ones(2, dtype=m.int32))",
    "m.ones_like(m.ones(2), dtype=m.bool)",
    "m.full_like(m.ones(2), 3)",
    "m.full_like(m.ones(2, dtype=m.int64), 2.7)",
    "m.empty_like(m.ones(2, 2)).shape",
    "m.from_numpy(np.arange(3))",
    "m.from_numpy(np.ones(2, np.float32))",
    "m.as_tensor([1, 2])",
    "m.as_tensor(np.ones(2), dtype=m.float32)",
]


@pytest.mark.parametrize("expr", CREATION)
def test_creation_matches_torch(expr):
    a, b = _both(expr)
    _same(a, b, expr)


def test_creation_requires_grad_and_device():
    t = lf.zeros(2, requires_grad=True, device="cpu")
    assert t.requires_grad and t.is_leaf and t.device == lf.device("cpu") and t.grad is None
    assert lf.tensor([1.0], requires_grad=True).requires_grad
    with pytest.raises(lf.DTypeError, match="floating"):
        lf.tensor([1, 2], requires_grad=True)


def test_from_jax_and_jax_share_the_buffer():
    a = jnp.arange(4.0, dtype=jnp.float32)
    t = lf.from_jax(a)
    assert t.jax() is a and t.dtype is lf.float32 and t.shape == (4,)
    assert isinstance(lf.ones(2).jax(), jax.Array)
    with pytest.raises(TypeError, match="jax.Array"):
        lf.from_jax(np.ones(2))


def test_from_numpy_copies_so_later_numpy_writes_do_not_leak():
    a = np.arange(3.0)
    t = lf.from_numpy(a)
    a[0] = 99.0
    assert t.tolist() == [0.0, 1.0, 2.0] and t.dtype is lf.float64


ATTRS = [
    "x.shape",
    "x.ndim",
    "x.dim()",
    "x.size()",
    "x.size(1)",
    "x.size(-1)",
    "x.numel()",
    "x.dtype",
    "x.is_floating_point()",
    "x.requires_grad",
    "x.is_leaf",
    "x.grad",
    "len(x)",
    "x.tolist()",
    "x[0, 1].item()",
    "[r.tolist() for r in x]",
    "x.element_size()",
    "x.T",
    "x.mT",
    "x.t()",
    "x.is_contiguous()",
    "x.contiguous()",
    "x.clone()",
    "x.detach()",
    "x.to(m.int32)",
    "x.to(m.float64)",
    "x.to('cpu')",
    "x.to('cpu', m.float16)",
    "x.to(dtype=m.int64)",
    "x.to(m.ones(1, dtype=m.float64))",
    "x.float()",
    "x.double()",
    "x.half()",
    "x.bfloat16()",
    "x.long()",
    "x.int()",
    "x.short()",
    "x.bool()",
    "abs(x).byte()",
    "x.type_as(m.ones(1, dtype=m.int16))",
    "bool(x[0, 0])",
    "float(x[1, 1])",
    "int(x[1, 2])",
    "int(-x[1, 2])",
    "x.new_zeros(2)",
    "x.new_ones((1, 2))",
    "x.new_full((2,), 3.0)",
    "x.new_tensor([1, 2])",
    "x.numpy().tolist()",
    "np.asarray(x).dtype == np.float32",
    "np.array(x, dtype=np.float64).dtype == np.float64",
]


@pytest.mark.parametrize("expr", ATTRS)
def test_attributes_and_conversions_match_torch(expr):
    a = eval(expr, {"m": lf, "np": np, "x": lf.tensor([[1.5, -2.0, 0.0], [3.25, 4.0, -5.75]])})
    b = eval(expr, {"m": torch, "np": np, "x": torch.tensor([[1.5, -2.0, 0.0], [3.25, 4.0, -5.75]])})
    _same(a, b, expr)


def test_conversion_errors():
    x = lf.tensor([1.0, 2.0])
    with pytest.raises((ValueError, RuntimeError), match="one element"):
        x.item()
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(x)
    with pytest.raises(TypeError, match="0-d"):
        len(lf.tensor(1.0))
    with pytest.raises(TypeError, match="0-d"):
        iter(lf.tensor(1.0))
    with pytest.raises(TypeError, match="unexpected keyword"):
        x.to(foo=1)


def test_iteration_yields_rows_and_index_conversion():
    rows = list(lf.tensor([[1, 2], [3, 4]]))
    assert [r.tolist() for r in rows] == [[1, 2], [3, 4]]
    assert [1, 2, 3][lf.tensor(1)] == 2  # __index__
    with pytest.raises(TypeError, match="integer tensors of a single element"):
        [1, 2][lf.tensor(1.0)]


def test_autograd_attributes():
    x = lf.tensor([1.0, 2.0]).requires_grad_()
    y = x * 2
    assert not y.is_leaf and y.requires_grad and y.grad_fn is not None
    y.retain_grad()
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(y.grad.numpy(), [1.0, 1.0])
    d = y.detach()
    assert d.is_leaf and not d.requires_grad and d.grad_fn is None
    assert x.requires_grad_(False) is x and not x.requires_grad


# ---------------------------------------------------------------- dtypes and devices
def test_dtype_singletons_aliases_and_properties():
    names = ["float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"]
    for n in names:
        d, t = getattr(lf, n), getattr(torch, n)
        assert d.is_floating_point == t.is_floating_point and d.itemsize == t.itemsize, n
        assert lf.tensor([1], dtype=d).dtype is d
        assert repr(d) == f"lazyflow.{n}"
    for alias, target in [
        ("long", "int64"),
        ("int", "int32"),
        ("short", "int16"),
        ("float", "float32"),
        ("double", "float64"),
        ("half", "float16"),
    ]:
        assert getattr(lf, alias) is getattr(lf, target)
    assert lf.bool is lf.bool_ and builtins.bool(1) is True  # the builtin stays reachable
    assert lf.get_default_dtype() is lf.float32


def test_64_bit_dtypes_are_honoured_not_downgraded():
    x = lf.tensor([2**40 + 1])
    assert x.dtype is lf.int64 and x.item() == 2**40 + 1
    y = lf.tensor([1.0 + 1e-12], dtype=lf.float64)
    assert y.dtype is lf.float64 and y.item() == 1.0 + 1e-12
    assert (lf.ones(2, dtype=lf.float64) * 3).dtype is lf.float64
    assert lf.arange(3).dtype is lf.int64 and lf.randint(0, 5, (2,)).dtype is lf.int64


def test_devices():
    d = lf.device("cpu")
    assert d == "cpu" and d.type == "cpu" and d.index is None and str(d) == "cpu" and repr(d) == "device(type='cpu')"
    assert lf.device("cuda:1").index == 1 and lf.device("cuda", 0) == lf.device("cuda:0")
    assert lf.ones(2).device == d and not lf.ones(2).is_cuda
    with pytest.raises(lf.DeviceError, match="unknown device type 'tpx'"):
        lf.device("tpx")
    gpus = [x for x in jax.devices() if x.platform == "gpu"]
    if gpus:
        t = lf.ones(2).to("cuda")
        assert t.device == lf.device("cuda:0") and t.is_cuda and t.cpu().device == d
        assert "device='cuda:0'" in repr(t)
    else:
        with pytest.raises(lf.DeviceError, match="no gpu devices"):
            lf.ones(2).to("cuda")
        with pytest.raises(lf.DeviceError, match="cuda"):
            lf.zeros(2, device="cuda:0")


# ---------------------------------------------------------------- printing
REPRS = [
    np.array([1.5, 2.25, -3.0], np.float32),
    np.arange(6, dtype=np.float32).reshape(2, 3),
    np.array(3.0, np.float32),
    np.array([1e10, 1.0], np.float32),
    np.array([1e-5, 1.0], np.float32),
    np.array([np.nan, 1.5, -np.inf, 0.0]),
    np.array([123456789.0, 1.0]),
    np.arange(3000).reshape(10, 300),
    np.random.default_rng(0).standard_normal((40, 30)),
    np.random.default_rng(1).standard_normal((3, 4, 5)).astype(np.float32) * 1000,
    np.array([-1, 100000, 7]),
    np.array([[True, False], [False, False]]),
    np.array([True, True]),
    np.zeros((2, 0, 3), np.float32),
    np.zeros((0,), np.int64),
    np.arange(100).astype(np.int8),
    np.array([-0.0, 1.0]),
    np.arange(40.0).reshape(2, 20),
    np.random.default_rng(2).standard_normal((7, 8, 9, 3)).astype(np.float32),
]


@pytest.mark.parametrize("i", range(len(REPRS)))
def test_repr_matches_torch(i):
    a = REPRS[i]
    assert repr(lf.tensor(a)).replace("lazyflow.", "torch.") == repr(torch.tensor(a))
    assert str(lf.tensor(a)).replace("lazyflow.", "torch.") == str(torch.tensor(a))


def test_repr_suffixes():
    assert repr(lf.tensor([1.5, 2.0], dtype=lf.bfloat16)) == "tensor([1.5000, 2.0000], dtype=lazyflow.bfloat16)"
    assert repr(lf.tensor([1.0], requires_grad=True)) == "tensor([1.], requires_grad=True)"
    assert repr(lf.tensor([1.0], requires_grad=True) * 2) == "tensor([2.], grad_fn=<MulBackward0>)"
    assert repr(lf.tensor([1, 2], dtype=lf.int32)) == "tensor([1, 2], dtype=lazyflow.int32)"
    assert repr(lf.tensor([], dtype=lf.int64)) == "tensor([], dtype=lazyflow.int64)"


# ---------------------------------------------------------------- operators, reflected and in-place forms
X = np.array([[1.5, -2.0, 0.5, 3.0], [-0.5, 2.5, -1.0, 4.0], [0.25, -3.5, 2.0, -4.5]], np.float32)
I = np.array([[3, -2, 0, 7], [-5, 4, 1, 6], [2, -1, 9, -8]])

STATEMENTS = [
    "r = a + b",
    "r = a - 1",
    "r = a * b",
    "r = a / b",
    "r = a // b",
    "r = a % b",
    "r = a ** 2",
    "r = a @ b.T",
    "r = b @ a.T",
    "r = -a",
    "r = +a",
    "r = abs(a)",
    "r = 2 - a",
    "r = 2 / a",
    "r = 2 ** a",
    "r = 7 // a",
    "r = 7 % a",
    "r = 3 * a",
    "r = 1 + a",
    "r = a > b",
    "r = 1 < a",
    "r = a == 0.5",
    "r = a != b",
    "r = a >= 0",
    "r = (a > 0) & (a < 3)",
    "r = (a > 0) | True",
    "r = ~(a > 0)",
    "r = (a > 0) ^ (a < 2)",
    "r = i & 3",
    "r = ~i",
    "r = i | 8",
    "r = i ^ i",
    "r = i >> 1",
    "r = i << 2",
    "r = 3 & i",
    "r = i / 2",
    "r = i // 2",
    "r = i % 3",
    "r = i ** 2",
    "r = i ** 0.5",
    "r = i * 1.5",
    "r = i + True",
    "r = (a > 0) + (a > 1)",
    "r = (a > 0) * 2",
    "r = m.tensor(5) + b",
    "r = m.tensor(5.0, dtype=m.float64) + b",
    "r = m.tensor([5.0], dtype=m.float64) + b",
    "r = i + m.tensor(2.5)",
    "r = i.to(m.int8) + m.tensor(300)",
    "r = i.to(m.int16) * 2.5",
    "r = a.pow(b)",
    "r = m.pow(2, a)",
    "r = a.where(a > 0, b)",
    "r = a.float_power(2) if False else a.square()",
]
INPLACE = [
    "a.add_(b)",
    "a.add_(b, alpha=2)",
    "a.sub_(1)",
    "a.sub_(b, alpha=0.5)",
    "a.mul_(b)",
    "a.div_(2)",
    "a.div_(b, rounding_mode='floor')",
    "a.div_(b, rounding_mode='trunc')",
    "a.zero_()",
    "a.fill_(3)",
    "a.fill_(m.tensor(2.0))",
    "a.copy_(b)",
    "a.copy_(i)",
    "a.clamp_(-1, 1)",
    "a.clamp_(min=0)",
    "a.clamp_(max=m.tensor(0.5))",
    "a.masked_fill_(a > 0, 9)",
    "a.index_add_(0, m.tensor([0, 2, 0]), m.ones(3, 4))",
    "a.index_add_(1, m.tensor([1, 1]), m.ones(3, 2), alpha=3)",
    "a.relu_()",
    "a.exp_()",
    "a.neg_()",
    "a.sigmoid_()",
    "a.abs_()",
    "a.sqrt_()",
    "a.pow_(2)",
    "a.floor_()",
    "a.round_()",
    "a.tanh_()",
    "a.lerp_(b, 0.5)",
    "a.addcmul_(a, b, value=2)",
    "a.addcdiv_(a, b + 10, value=0.5)",
    "a.scatter_(1, m.tensor([[0], [1], [2]]), 7.0)",
    "a.scatter_add_(1, m.tensor([[0, 0]] * 3), m.ones(3, 2))",
    "i.bitwise_and_(6)",
    "i.remainder_(4)",
    "a += 1",
    "a -= b",
    "a *= 2",
    "a /= 4",
    "a **= 2",
    "a //= 3",
    "a %= 3",
    "a += i",
    "i += 1",
    "i //= 2",
    "i &= 5",
    "i |= 8",
    "i ^= 3",
    "i <<= 1",
    "i >>= 1",
]


def _run(stmt, lib, out):
    env = {"m": lib, "np": np, "a": lib.tensor(X), "b": lib.tensor(X[0] + 5), "i": lib.tensor(I)}
    exec(stmt, env)
    return env[out], env


@pytest.mark.parametrize("stmt", STATEMENTS)
def test_operators_match_torch(stmt):
    a, _ = _run(stmt, lf, "r")
    b, _ = _run(stmt, torch, "r")
    _same(a, b, stmt)


@pytest.mark.parametrize("stmt", INPLACE)
def test_inplace_ops_match_torch_and_return_self(stmt):
    target = "i" if stmt.lstrip().startswith("i") else "a"
    (la, _), (ta, _) = _run(stmt, lf, target), _run(stmt, torch, target)
    _same(la, ta, stmt)
    if "=" not in stmt.split("(")[0]:  # method form: returns the tensor itself
        env = {"m": lf, "np": np, "a": lf.tensor(X), "b": lf.tensor(X[0] + 5), "i": lf.tensor(I)}
        obj = env[target]
        assert eval(stmt, env) is obj, stmt


def test_inplace_errors_like_torch():
    i = lf.tensor(I)
    with pytest.raises(lf.DTypeError, match="can't be cast"):
        i += 1.5
    with pytest.raises(lf.DTypeError, match="can't be cast"):
        i /= 2
    with pytest.raises(lf.ShapeError, match="doesn't match the broadcast shape"):
        lf.ones(4).add_(lf.ones(3, 4))
    with pytest.raises(lf.AutogradError, match="leaf"):
        lf.ones(2, requires_grad=True).add_(1)
    with pytest.raises(lf.DTypeError, match="bool"):
        lf.tensor([True]).sub_(True)
    with pytest.raises(lf.ShapeError, match="copy_"):
        lf.ones(3).copy_(lf.ones(2))
    np.testing.assert_array_equal(i.numpy(), I)


def test_issue_method_and_function_names_exist():
    ops = (
        "abs exp log log1p expm1 sqrt rsqrt pow sin cos tanh sigmoid relu gelu silu softplus erf sign floor "
        "ceil round clamp maximum minimum where matmul mm bmm sum mean prod max min amax amin argmax argmin var "
        "std logsumexp norm all any cumsum softmax log_softmax reshape view flatten unflatten squeeze unsqueeze "
        "permute transpose t expand expand_as broadcast_to repeat tile split chunk unbind flip roll gather "
        "scatter scatter_add index_select masked_fill sort argsort topk tril triu logical_and logical_or "
        "logical_not add sub mul div floor_divide remainder neg eq ne lt le gt ge"
    ).split()
    for n in ops:
        assert callable(getattr(lf, n)), n
        assert callable(getattr(lf.Tensor, n)), n
    for n in (
        "einsum",
        "cat",
        "stack",
        "one_hot",
        "pad",
        "rand",
        "randn",
        "randint",
        "randperm",
        "multinomial",
        "bernoulli",
        "normal",
        "manual_seed",
    ):
        assert callable(getattr(lf, n)), n
    for n in (
        "add_ sub_ mul_ div_ zero_ fill_ copy_ clamp_ masked_fill_ index_add_ uniform_ normal_ bernoulli_ "
        "detach clone to float double half bfloat16 long int bool type_as contiguous requires_grad_ "
        "retain_grad numpy tolist item size numel dim jax"
    ).split():
        assert callable(getattr(lf.Tensor, n)), n
    assert lf.Tensor.mT is not None and isinstance(lf.Tensor.__dict__["shape"], property)


def test_reductions_on_0d_accept_dim_0_like_torch():
    for expr in (
        "x.sum(0)",
        "x.max(0)",
        "x.softmax(0)",
        "x.cumsum(-1)",
        "x.argmax(0)",
        "x.sort(0)",
        "x.topk(1)",
        "x.mean(-1, keepdim=True)",
        "x.all(())",
        "x.amax(0)",
    ):
        a = eval(expr, {"x": lf.tensor(2.5)})
        b = eval(expr, {"x": torch.tensor(2.5)})
        _same(tuple(a) if isinstance(a, tuple) else a, tuple(b) if isinstance(b, tuple) else b, expr)
    with pytest.raises(lf.IndexOutOfRangeError, match="Dimension out of range"):
        lf.tensor(2.5).sum(1)


def test_named_result_tuples():
    x = lf.tensor([[1.0, 5.0, 3.0]])
    r = x.max(1)
    assert r.values.tolist() == [5.0] and r.indices.tolist() == [1]
    v, i = x.topk(2)
    assert v.tolist() == [[5.0, 3.0]] and i.tolist() == [[1, 2]]
    assert x.sort(descending=True).indices.tolist() == [[1, 2, 0]]
