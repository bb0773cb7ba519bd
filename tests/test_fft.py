"""lf.fft and lf.stft/lf.istft against torch: values, dtypes, norms, n/s/dim handling, gradients (including the
one-sided transforms' Hermitian handling), graph mode and bad input."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from _harness import compiled

import lazyflow as lf

_R = np.random.default_rng(0)
X = _R.standard_normal((4, 6)).astype(np.float32)
Z = (_R.standard_normal((4, 5)) + 1j * _R.standard_normal((4, 5))).astype(np.complex64)
_DT = {
    torch.complex64: lf.complex64,
    torch.complex128: lf.complex128,
    torch.float32: lf.float32,
    torch.float64: lf.float64,
}


def _np(t):
    return t.detach().resolve_conj().numpy() if isinstance(t, torch.Tensor) else t.detach().numpy()


def _same(a, b, tol=1e-5):
    assert a.dtype is _DT[b.dtype], (a.dtype, b.dtype)
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(_np(a), _np(b), rtol=tol, atol=tol)


_C2C = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn"]
_C2R = ["irfft", "hfft", "irfft2", "irfftn", "hfft2", "hfftn"]
_R2C = ["rfft", "ihfft", "rfft2", "ihfft2", "rfftn", "ihfftn"]


@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
def test_every_transform_matches_torch(norm):
    for name in _C2C + _C2R:
        _same(getattr(lf.fft, name)(lf.tensor(Z), norm=norm), getattr(torch.fft, name)(torch.tensor(Z), norm=norm))
    for name in _R2C + _C2C:
        _same(getattr(lf.fft, name)(lf.tensor(X), norm=norm), getattr(torch.fft, name)(torch.tensor(X), norm=norm))


@pytest.mark.parametrize(
    "name,kw",
    [
        ("fft", dict(n=9, dim=0)),
        ("ifft", dict(n=3)),
        ("rfft", dict(n=7)),
        ("irfft", dict(n=7)),  # odd output length
        ("irfft", dict(n=4, dim=0)),
        ("hfft", dict(n=9)),
        ("ihfft", dict(n=5, dim=0)),
        ("fft2", dict(s=(3, 8))),
        ("rfft2", dict(s=(5, -1))),
        ("irfft2", dict(s=(4, 7), dim=(1, 0))),
        ("fftn", dict(s=(6,))),
        ("rfftn", dict(dim=(0,))),
        ("irfftn", dict(s=(3, 5))),
        ("ifftn", dict(dim=(1, 0), norm="ortho")),
    ],
)
def test_n_s_and_dim_match_torch(name, kw):
    src = Z if name.startswith(("i", "h")) and name not in ("ihfft",) else X
    if name in ("fft", "fft2", "fftn"):
        src = Z
    _same(getattr(lf.fft, name)(lf.tensor(src), **kw), getattr(torch.fft, name)(torch.tensor(src), **kw))


def test_dtype_rules_match_torch():
    for arr in (X.astype(np.float64), np.arange(6), np.array([True, False, True]), Z.astype(np.complex128)):
        for name in ("fft", "ifft"):
            _same(getattr(lf.fft, name)(lf.tensor(arr)), getattr(torch.fft, name)(torch.tensor(arr)), 1e-6)
    for arr in (X.astype(np.float64), np.arange(6)):
        _same(lf.fft.rfft(lf.tensor(arr)), torch.fft.rfft(torch.tensor(arr)), 1e-6)
        _same(lf.fft.irfft(lf.tensor(arr)), torch.fft.irfft(torch.tensor(arr)), 1e-6)


def test_half_precision_inputs_compute_in_float32():
    """README: torch's CPU build has no half-precision FFT; here float16/bfloat16 compute in float32."""
    for d in (lf.float16, lf.bfloat16):
        x = lf.tensor(X, dtype=d)
        got = lf.fft.fft(x)
        assert got.dtype is lf.complex64 and lf.fft.irfft(got).dtype is lf.float32
        _same(got, torch.fft.fft(torch.tensor(X, dtype=torch.float16 if d is lf.float16 else torch.bfloat16).float()))


def test_frequencies_and_shifts_match_torch():
    for n, d in ((1, 1.0), (5, 1.0), (8, 0.25)):
        _same(lf.fft.fftfreq(n, d), torch.fft.fftfreq(n, d), 1e-7)
        _same(lf.fft.rfftfreq(n, d), torch.fft.rfftfreq(n, d), 1e-7)
    _same(lf.fft.fftfreq(6, dtype=lf.float64), torch.fft.fftfreq(6, dtype=torch.float64), 0)
    for kw in ({}, {"dim": 0}, {"dim": (1,)}, {"dim": (0, 1)}):
        _same(lf.fft.fftshift(lf.tensor(Z), **kw), torch.fft.fftshift(torch.tensor(Z), **kw), 0)
        _same(lf.fft.ifftshift(lf.tensor(X), **kw), torch.fft.ifftshift(torch.tensor(X), **kw), 0)


# ---------------------------------------------------------------- gradients
_GRADS = {
    "rfft": (X, lambda m, t: (m.fft.rfft(t).abs() ** 2 * m.arange(4.0)).sum()),
    "rfft_odd_n": (X, lambda m, t: m.view_as_real(m.fft.rfft(t, n=7, norm="ortho")).pow(2).sum()),
    "irfft_even": (Z, lambda m, t: (m.fft.irfft(t, n=8) * m.arange(8.0)).sum()),
    "irfft_odd": (Z, lambda m, t: (m.fft.irfft(t, n=9) ** 2).sum()),
    "irfft_default": (Z, lambda m, t: (m.fft.irfft(t, norm="forward") ** 3).sum()),
    "hfft": (Z, lambda m, t: (m.fft.hfft(t) * m.arange(8.0)).sum()),
    "ihfft": (X, lambda m, t: (m.view_as_real(m.fft.ihfft(t).resolve_conj()) ** 3).sum()),
    "fft2": (Z, lambda m, t: m.fft.fft2(t, norm="ortho").real.sum() + m.fft.ifft2(t).imag.pow(2).sum()),
    "rfftn_irfftn": (X, lambda m, t: (m.fft.irfftn(m.fft.rfftn(t) * m.fft.rfftn(t), s=(4, 6)) ** 2).sum()),
    "irfft2": (Z, lambda m, t: (m.fft.irfft2(t, s=(4, 7)) ** 2).sum()),
}


def _grad(mod, fn, arr):
    t = mod.tensor(arr, requires_grad=True)
    fn(mod, t).backward()
    return _np(t.grad)


@pytest.mark.parametrize("name", list(_GRADS))
def test_gradients_match_torch(name):
    arr, fn = _GRADS[name]
    np.testing.assert_allclose(_grad(lf, fn, arr), _grad(torch, fn, arr), rtol=1e-4, atol=1e-4)


def test_graph_mode_values_and_gradients_match_torch():
    def fn(m, t):
        return (m.fft.irfft(m.fft.rfft(t) * m.fft.fftfreq(6)[:4], n=6) ** 2).sum() + m.fft.fftshift(t).sum()

    x = lf.tensor(X, requires_grad=True)
    out = compiled(lambda t: fn(lf, t))(x)
    out.backward()
    t = torch.tensor(X, requires_grad=True)
    want = fn(torch, t)
    want.backward()
    assert float(out) == pytest.approx(want.item(), rel=1e-5)
    np.testing.assert_allclose(_np(x.grad), _np(t.grad), rtol=1e-4, atol=1e-4)


def test_bad_input():
    with pytest.raises(lf.ValueRangeError, match=r"Invalid number of data points \(0\)"):
        lf.fft.irfft(lf.tensor(Z), n=0)
    with pytest.raises(lf.ValueRangeError, match="size >= 2"):
        lf.fft.irfft(lf.tensor([1 + 1j]))
    with pytest.raises(RuntimeError):
        torch.fft.irfft(torch.tensor([1 + 1j]))
    with pytest.raises(lf.DTypeError, match="rfft expects a real input tensor, but got complex64"):
        lf.fft.rfft(lf.tensor(Z))
    with pytest.raises(lf.ValueRangeError, match="invalid normalization mode"):
        lf.fft.fft(lf.tensor(X), norm="sideways")
    with pytest.raises(lf.ValueRangeError, match="same length"):
        lf.fft.fftn(lf.tensor(X), s=(2, 2), dim=(0,))
    with pytest.raises(lf.DTypeError):
        lf.fft.fft([1.0, 2.0])


# ---------------------------------------------------------------- stft / istft
S = _R.standard_normal((2, 64)).astype(np.float32)
_STFT = [
    dict(n_fft=16),
    dict(n_fft=16, hop_length=5, win_length=12, window="hann"),
    dict(n_fft=15, center=False, normalized=True),
    dict(n_fft=16, onesided=False, pad_mode="constant", window="hann"),
    dict(n_fft=16, hop_length=4, win_length=11, window="hann", center=False, align_to_window=True),
]


def _win(mod, kw):
    kw = dict(kw)
    if kw.pop("window", None):
        kw["window"] = mod.hann_window(kw.get("win_length", kw["n_fft"]))
    return kw


@pytest.mark.parametrize("kw", _STFT, ids=str)
def test_stft_and_istft_match_torch(kw):
    a = lf.stft(lf.tensor(S), return_complex=True, **_win(lf, kw))
    b = torch.stft(torch.tensor(S), return_complex=True, **_win(torch, kw))
    _same(a, b, 1e-5)
    ikw = {k: v for k, v in kw.items() if k not in ("pad_mode", "align_to_window")}
    if kw.get("align_to_window"):
        return
    _same(lf.istft(a, **_win(lf, ikw)), torch.istft(b, **_win(torch, ikw)), 1e-5)


def test_istft_length_methods_and_one_dim_input():
    w16 = (lf.hann_window(16), torch.hann_window(16))
    a = lf.tensor(S[0]).stft(16, window=w16[0], return_complex=True)
    b = torch.tensor(S[0]).stft(16, window=w16[1], return_complex=True)
    _same(a, b)
    for n in (50, 70):
        _same(a.istft(16, window=w16[0], length=n), b.istft(16, window=w16[1], length=n))
    np.testing.assert_allclose(_np(lf.istft(a, 16, window=w16[0], length=64)), S[0], atol=1e-5)  # round trip


def test_stft_gradients_and_graph_mode_match_torch():
    def fn(m, t):
        w = m.hann_window(16)
        s = m.stft(t, 16, hop_length=4, window=w, return_complex=True)
        return (m.istft(s * s.abs(), 16, hop_length=4, window=w) ** 2).sum()

    t = torch.tensor(S, requires_grad=True)
    fn(torch, t).backward()
    x = lf.tensor(S, requires_grad=True)
    fn(lf, x).backward()
    scale = np.abs(_np(t.grad)).max()
    np.testing.assert_allclose(_np(x.grad) / scale, _np(t.grad) / scale, atol=1e-5)
    y = lf.tensor(S, requires_grad=True)
    compiled(lambda u: fn(lf, u))(y).backward()
    np.testing.assert_allclose(_np(y.grad) / scale, _np(t.grad) / scale, atol=1e-5)


def test_stft_bad_input_like_torch():
    x = lf.tensor(S)
    with pytest.raises(RuntimeError, match="return_complex"):
        torch.stft(torch.tensor(S), 16)
    with pytest.raises(lf.DTypeError, match="return_complex=True") as e:
        lf.stft(x, 16)
    assert isinstance(e.value, RuntimeError)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        old = lf.stft(x, 16, window=lf.hann_window(16), return_complex=False)
    assert any("deprecated" in str(m.message) for m in w)
    new = lf.view_as_real(lf.stft(x, 16, window=lf.hann_window(16), return_complex=True))
    np.testing.assert_array_equal(_np(old), _np(new))
    with pytest.raises(lf.ValueRangeError, match="n_fft=200"):
        lf.stft(x, 200, center=False, return_complex=True)
    with pytest.raises(lf.ShapeError, match="window"):
        lf.stft(x, 16, window=lf.ones(5), return_complex=True)
    with pytest.raises(lf.ValueRangeError, match="center = false"):
        lf.stft(x, 16, align_to_window=True, return_complex=True)
    spec = lf.stft(x, 16, return_complex=True)
    with pytest.raises(lf.ValueRangeError, match="overlap add min"):
        lf.istft(spec, 16, window=lf.zeros(16))
    # a periodic Hann window is 0 at its first sample: without centre padding the signal's first sample is lost
    hann = lf.stft(x, 15, center=False, window=lf.hann_window(15), return_complex=True)
    with pytest.raises(lf.ValueRangeError, match="overlap add min"):
        lf.istft(hann, 15, center=False, window=lf.hann_window(15))
    th = torch.stft(torch.tensor(S), 15, center=False, window=torch.hann_window(15), return_complex=True)
    with pytest.raises(RuntimeError, match="overlap add min"):
        torch.istft(th, 15, center=False, window=torch.hann_window(15))
    with pytest.raises(lf.DTypeError, match="complex-valued input"):
        lf.istft(lf.view_as_real(spec), 16)
    with pytest.raises(lf.ShapeError, match="frequencies"):
        lf.istft(spec, 20)
