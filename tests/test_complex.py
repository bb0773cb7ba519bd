"""Complex dtypes against torch: promotion, creation and printing, the complex ops, ops torch refuses for complex
operands, torch's gradient convention for complex leaves (eager, lf.compile, lf.nn.Graph) and checkpoints."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _harness import compiled

import lazyflow as lf

C64, C128 = lf.complex64, lf.complex128
_T = {
    lf.float16: torch.float16,
    lf.float32: torch.float32,
    lf.float64: torch.float64,
    lf.int64: torch.int64,
    lf.int32: torch.int32,
    lf.uint8: torch.uint8,
    lf.bool: torch.bool,
    C64: torch.complex64,
    C128: torch.complex128,
}


def _z(shape=(3, 4), seed=0, dtype=np.complex64):
    r = np.random.default_rng(seed)
    return (r.standard_normal(shape) + 1j * r.standard_normal(shape)).astype(dtype)


def _np(t):
    if isinstance(t, torch.Tensor):
        return t.detach().resolve_conj().numpy()
    return t.detach().numpy()


# ---------------------------------------------------------------- dtypes and promotion
def test_dtype_objects_match_torch():
    assert lf.cfloat is C64 and lf.cdouble is C128
    assert lf.zeros(1, dtype="cfloat").dtype is C64 and lf.zeros(1, dtype="torch.complex128").dtype is C128
    for d in (C64, C128):
        t = _T[d]
        assert d.is_complex is t.is_complex is True
        assert d.is_floating_point is t.is_floating_point is False
        assert d.is_signed is t.is_signed is True
        assert d.itemsize == t.itemsize
    assert not lf.float32.is_complex
    assert lf.zeros(2, dtype=C64).is_complex() and not lf.zeros(2, dtype=C64).is_floating_point()


def test_promote_types_match_torch():
    ds = list(_T)
    for a in ds:
        for b in ds:
            want = torch.promote_types(_T[a], _T[b])
            assert _T[lf.promote_types(a, b)] == want, (a, b)


def test_result_dtypes_of_mixed_operands_match_torch():
    cases = [
        (lambda m: m.ones(2) * 1j, None),
        (lambda m: m.ones(2, dtype=m.float64) * 1j, None),
        (lambda m: m.arange(3) * (1 + 2j), None),
        (lambda m: m.ones(2) + m.tensor(1j, dtype=m.complex128), None),  # 0-dim complex128 keeps float32's width
        (lambda m: m.ones(2, dtype=m.float64) + m.tensor([1j]), None),
        (lambda m: m.tensor([True]) * 1j, None),
        (lambda m: m.tensor([1j]) / 2, None),
    ]
    for f, _ in cases:
        a, b = f(lf), f(torch)
        assert _T[a.dtype] == b.dtype
        np.testing.assert_allclose(_np(a), _np(b))


def test_default_complex_follows_the_default_float():
    lf.set_default_dtype(lf.float64)
    try:
        assert lf.tensor([1j]).dtype is C128 and (lf.ones(2) * 1j).dtype is C128
        assert str(lf.tensor([1 + 1j])) == "tensor([1.+1.j])"
    finally:
        lf.set_default_dtype(lf.float32)
    assert lf.tensor([1j]).dtype is C64


def test_finfo_of_complex_is_the_real_parts():
    for d in (C64, C128):
        a, b = lf.finfo(d), torch.finfo(_T[d])
        assert (a.eps, a.max, a.min, a.tiny, a.bits, a.resolution) == (
            b.eps,
            b.max,
            b.min,
            b.tiny,
            b.bits,
            b.resolution,
        )
    with pytest.raises(lf.DTypeError):
        lf.iinfo(C64)


# ---------------------------------------------------------------- creation, conversion, printing
def test_creation_numpy_item_and_casts():
    assert lf.tensor([1 + 2j]).dtype is C64
    assert lf.tensor([1, 2.5, 3j]).dtype is C64
    src = np.array([1 + 2j, 3 - 4j])
    t = lf.tensor(src)
    src[0] = 0  # a private copy
    assert t.dtype is C128 and t.numpy().tolist() == [1 + 2j, 3 - 4j]
    assert lf.tensor(1 - 2j).item() == torch.tensor(1 - 2j).item() == 1 - 2j
    assert isinstance(lf.tensor(1j).item(), complex)
    x = lf.tensor([1.5, -2.0])
    assert x.cfloat().dtype is C64 and x.cdouble().dtype is C128 and x.to(lf.cfloat).dtype is C64
    np.testing.assert_array_equal(x.cdouble().numpy(), np.array([1.5, -2.0], np.complex128))


@pytest.mark.parametrize(
    "data",
    [[1 + 2j], [1.5 + 2j, -3 - 0.25j], [[1e-5 + 1j, 3], [2j, -1]], [1.0 + 0j], 1 + 2j, [1e10 + 1j, -2j], [0j]],
    ids=str,
)
def test_printing_matches_torch(data):
    assert str(lf.tensor(data)) == str(torch.tensor(data))
    got = repr(lf.tensor(data, dtype=C128)).replace("lazyflow.", "torch.")
    assert got == repr(torch.tensor(data, dtype=torch.complex128))


# ---------------------------------------------------------------- the complex ops (forward)
_Z = _z()


@pytest.mark.parametrize(
    "name,fn",
    [
        ("real", lambda m, z: m.real(z)),
        ("imag", lambda m, z: m.imag(z)),
        ("real_prop", lambda m, z: z.real * 2 + z.imag),
        ("view_as_real", lambda m, z: m.view_as_real(z)),
        ("view_as_complex", lambda m, z: m.view_as_complex(m.view_as_real(z) * 2)),
        ("view_as_real_copy", lambda m, z: m.view_as_real_copy(z)),
        ("complex", lambda m, z: m.complex(z.real, z.imag[:1])),
        ("polar", lambda m, z: m.polar(z.abs(), z.real)),
        ("angle", lambda m, z: m.angle(z)),
        ("angle_real", lambda m, z: m.angle(z.real)),
        ("conj", lambda m, z: m.conj(z)),
        ("conj_physical", lambda m, z: m.conj_physical(z)),
        ("resolve_conj", lambda m, z: z.conj().resolve_conj()),
        ("abs", lambda m, z: z.abs()),
        ("sgn", lambda m, z: m.sgn(m.cat([z, z * 0]))),
        ("arith", lambda m, z: (z + 1) * z - z / (z + 2j) + 2.5),
        ("pow", lambda m, z: z**2 + z**0.5 + 2**z),
        ("unary", lambda m, z: z.exp() + z.log() + z.sqrt() + z.sin() + z.cos() + z.tanh() + z.sigmoid()),
        ("reduce", lambda m, z: m.stack([z.sum(0), z.mean(0), z.prod(0)])),
        ("var_std", lambda m, z: m.stack([z.var(0), z.std(1, correction=0).repeat(2)[:4], z.var().expand(4)])),
        ("matmul", lambda m, z: z @ z.mT + m.einsum("ij,kj->ik", z, z)),
        ("shape", lambda m, z: m.cat([z.reshape(4, 3), z.T]).flatten()[2:9]),
        ("index", lambda m, z: z[1:, [0, 2]]),
        ("where", lambda m, z: m.where(z.real > 0, z, z * 1j)),
        ("eq", lambda m, z: (z == z.conj()) | (z != 1j)),
        ("isfinite", lambda m, z: m.isfinite(z / m.tensor([0j, 1, 1, 1]))),
        ("isnan", lambda m, z: m.isnan(z * m.tensor([float("nan"), 1, 1, 1]))),
        ("isclose", lambda m, z: m.isclose(z, z + 1e-9j)),
        ("is_conj", lambda m, z: m.tensor(z.is_conj())),
    ],
)
def test_forward_matches_torch(name, fn):
    a, b = fn(lf, lf.tensor(_Z)), fn(torch, torch.tensor(_Z))
    assert _T[a.dtype] == b.dtype, name
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(_np(a), _np(b), rtol=1e-5, atol=1e-5)


def test_allclose_and_real_of_real():
    z = lf.tensor(_Z)
    assert lf.allclose(z, z + 1e-9j) and not lf.allclose(z, z + 1e-3j)
    x = lf.ones(3)
    assert lf.real(x) is x and x.real is x and lf.conj(x) is x  # as torch: the tensor itself
    assert not lf.conj(z).is_conj()  # conj is applied at once: no lazy conjugate bit


# ---------------------------------------------------------------- writes through the parts
def test_assigning_real_and_imag_writes_the_tensor_like_torch():
    a, b = lf.tensor(_Z), torch.tensor(_Z)
    a.real = lf.ones(4)
    b.real = torch.ones(4)
    a.imag = 3.0
    b.imag = torch.tensor(3.0)
    np.testing.assert_allclose(_np(a), _np(b))
    x, y = lf.zeros(2), torch.zeros(2)
    x.real = lf.tensor([1.0, 2.0])
    y.real = torch.tensor([1.0, 2.0])
    np.testing.assert_allclose(_np(x), _np(y))
    with pytest.raises(lf.DTypeError, match="non-complex"):
        x.imag = 1.0


def test_in_place_through_a_part_does_not_alias():
    """Documented difference: torch's z.real is a view, here a new tensor (README "Known differences")."""
    z = lf.tensor([1 + 1j])
    z.real.mul_(5)
    assert z.item() == 1 + 1j


# ---------------------------------------------------------------- refusals and bad input
@pytest.mark.parametrize(
    "fn",
    [
        lambda m, z: z < z,
        lambda m, z: z.max(),
        lambda m, z: z.amin(0),
        lambda m, z: m.maximum(z, z),
        lambda m, z: z.sort(),
        lambda m, z: z.clamp(0, 1),
        lambda m, z: m.relu(z),
        lambda m, z: z.floor(),
        lambda m, z: z.argmax(),
        lambda m, z: z.topk(1),
    ],
)
def test_ops_torch_refuses_for_complex_raise_runtime_error(fn):
    with pytest.raises(RuntimeError):
        fn(torch, torch.tensor(_Z))
    with pytest.raises(lf.DTypeError, match="complex") as e:
        fn(lf, lf.tensor(_Z))
    assert isinstance(e.value, RuntimeError)


def test_bad_input_messages():
    with pytest.raises(lf.ShapeError, match="last dimension of size 2, got shape \\[3, 3\\]"):
        lf.view_as_complex(lf.ones(3, 3))
    with pytest.raises(lf.DTypeError, match="float and double"):
        lf.view_as_complex(lf.ones(3, 2, dtype=lf.int64))
    with pytest.raises(lf.DTypeError, match="complex tensors"):
        lf.view_as_real(lf.ones(3))
    with pytest.raises(lf.DTypeError, match="non-complex"):
        lf.imag(lf.ones(3))
    with pytest.raises(lf.DTypeError, match="float32, float64"):
        lf.complex(lf.ones(2), lf.ones(2, dtype=lf.float64))
    with pytest.raises(lf.DTypeError, match="complex64 can't be cast to the desired output type float32"):
        lf.ones(2).add_(1j)
    with pytest.raises(RuntimeError):
        torch.ones(2).add_(1j)
    with pytest.raises(lf.DTypeError, match="floating point and complex"):
        lf.ones(2, dtype=lf.int64).requires_grad_()


# ---------------------------------------------------------------- gradients: torch's convention
_GRADS = {
    "abs": lambda m, z: z.abs().sum(),
    "abs2": lambda m, z: (z * z.conj()).real.sum(),
    "real_imag": lambda m, z: (z.real * 2 - z.imag**2).sum(),
    "view_as_real": lambda m, z: (m.view_as_real(z) ** 3).sum(),
    "mul_exp": lambda m, z: (z * z.exp()).abs().sum(),
    "matmul": lambda m, z: (z @ z.mT.conj()).real.sum() + (z @ z.mT).imag.sum(),
    "angle_sgn": lambda m, z: z.angle().sum() + m.view_as_real(z.sgn()).sum(),
    "div_pow": lambda m, z: (1 / z).real.sum() + (z**2.5).abs().sum(),
    "sqrt_log_tanh": lambda m, z: (z.sqrt() + z.log()).real.sum() + z.tanh().imag.sum(),
    "reduce": lambda m, z: z.sum(0).abs().sum() + z.mean().real + z.prod(1).imag.sum(),
    "var_std": lambda m, z: z.var(0).sum() + z.std(),
    "fft_chain": lambda m, z: (m.fft.fft(z) * m.fft.ifft(z.conj())).real.sum() + m.fft.irfft(z, n=5).pow(2).sum(),
}


def _grad(mod, fn, z):
    t = mod.tensor(z, requires_grad=True)
    fn(mod, t).backward()
    return _np(t.grad)


@pytest.mark.parametrize("name", list(_GRADS))
def test_grad_of_complex_leaf_matches_torch_eager(name):
    np.testing.assert_allclose(_grad(lf, _GRADS[name], _Z), _grad(torch, _GRADS[name], _Z), rtol=1e-4, atol=1e-4)


def test_convention_is_torchs_not_jaxs():
    z = lf.tensor([1 + 2j], requires_grad=True)
    (z.abs() ** 2).sum().backward()
    assert z.grad.item() == pytest.approx(2 + 4j)  # torch: 2z; jax.grad would give 2 conj(z)


def test_grad_under_compile_matches_torch():
    fn = _GRADS["fft_chain"]
    g = compiled(lambda t: fn(lf, t) + _GRADS["matmul"](lf, t) + _GRADS["angle_sgn"](lf, t))
    z = lf.tensor(_Z, requires_grad=True)
    g(z).backward()
    t = torch.tensor(_Z, requires_grad=True)
    (fn(torch, t) + _GRADS["matmul"](torch, t) + _GRADS["angle_sgn"](torch, t)).backward()
    np.testing.assert_allclose(_np(z.grad), _np(t.grad), rtol=1e-4, atol=1e-4)


def test_complex_parameter_trains_in_nn_graph_like_torch():
    loss = lambda m, w: (m.fft.fft(w).abs() ** 2).sum() + (w @ w.mT).real.sum()

    class P(lf.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = lf.nn.Parameter(lf.tensor(_Z))

    class Step(lf.nn.Graph):
        def __init__(self, m, opt):
            super().__init__()
            self.m = m
            self.add_optimizer(opt)

        def build(self):
            out = loss(lf, self.m.w)
            out.backward()
            return out

    p = P()
    step = Step(p, lf.optim.SGD(p.parameters(), lr=0.05))
    w = torch.tensor(_Z, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.05)
    for _ in range(2):
        got = step()
        opt.zero_grad()
        want = loss(torch, w)
        want.backward()
        opt.step()
        assert float(got) == pytest.approx(want.item(), rel=1e-5)
    np.testing.assert_allclose(_np(p.w), _np(w), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- checkpoints
def test_complex_checkpoints_round_trip_with_torch(tmp_path):
    z, z2 = lf.tensor(_Z), lf.tensor(_z((2,), 1, np.complex128))
    lf.save({"z": z, "z2": z2}, tmp_path / "ck")  # lazyflow's own layout
    r = lf.load(tmp_path / "ck")
    assert r["z"].dtype is C64 and r["z2"].dtype is C128
    np.testing.assert_array_equal(r["z"].numpy(), _Z)
    lf.save({"z": z, "z2": z2}, tmp_path / "a.pth", format="torch")  # torch reads lazyflow's .pth
    t = torch.load(tmp_path / "a.pth", weights_only=True)
    assert t["z"].dtype == torch.complex64 and t["z2"].dtype == torch.complex128
    np.testing.assert_array_equal(t["z"].numpy(), _Z)
    torch.save({"w": torch.tensor(_Z).to(torch.complex128)}, tmp_path / "t.pth")  # lazyflow reads torch's
    w = lf.load(tmp_path / "t.pth")["w"]
    assert isinstance(w, lf.Tensor) and w.dtype is C128
    np.testing.assert_array_equal(w.numpy(), _Z.astype(np.complex128))


def test_complex_safetensors_round_trip_with_torch(tmp_path):
    st = pytest.importorskip("safetensors.torch")
    st.save_file({"z": torch.tensor(_Z)}, tmp_path / "t.safetensors")
    r = lf.load(tmp_path / "t.safetensors")["z"]
    assert r.dtype is C64
    np.testing.assert_array_equal(r.numpy(), _Z)
    lf.save({"z": lf.tensor(_Z)}, tmp_path / "l.safetensors", format="safetensors")
    back = st.load_file(tmp_path / "l.safetensors")["z"]
    assert back.dtype == torch.complex64
    np.testing.assert_array_equal(back.numpy(), _Z)


def test_double_backward_through_complex_matches_torch():
    c = np.array([1 + 2j, -0.5 + 0.3j, 2 - 1j], np.complex64)

    def run(m):
        z = m.tensor(c, requires_grad=True)
        loss = (z * z.exp()).abs().sum() + (z**3).real.sum()
        (g,) = m.autograd.grad(loss, z, create_graph=True)
        ((g.abs() ** 2).sum() + (g * z).imag.sum()).backward()
        return _np(g), _np(z.grad)

    for a, b in zip(run(lf), run(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * np.abs(b).max())


def test_documented_gaps_refuse_clearly():
    """README "Known differences": lf.func transforms of complex inputs are refused."""
    z = lf.tensor(_Z)
    with pytest.raises(lf.OpError, match="complex64"):
        lf.func.grad(lambda t: (t.abs() ** 2).sum())(z)
