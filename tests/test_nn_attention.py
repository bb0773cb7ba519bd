"""Attention against torch (the oracle): scaled_dot_product_attention (masks, causal, scale, GQA, fully masked
rows), MultiheadAttention and the Transformer encoder with torch's weights copied in (keys, shapes, forward,
attention weights and gradients; eager and compiled), dropout reproducibility, default init and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import lazyflow as lf
import lazyflow.nn.functional as F

RTOL = 1e-5


def _close(got, want, what=""):
    want = np.asarray(want, np.float64)
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-6)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=RTOL, atol=RTOL * scale, err_msg=what)


def _arr(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _pair(a, grad=True):
    if a.dtype == np.bool_:
        return lf.tensor(a), torch.tensor(a)
    return lf.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad)


def _causal(lq, s):
    return np.tril(np.ones((lq, s), np.bool_))


# (id, q shape, k shape, v shape, mask array or None, kwargs)
SDPA = [
    ("plain", (2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 3), None, {}),
    ("bool_mask", (2, 2, 4, 4), (2, 2, 5, 4), (2, 2, 5, 4), _arr((4, 5), 1) > -0.5, {}),
    ("float_mask", (2, 2, 4, 4), (2, 2, 4, 4), (2, 2, 4, 4), _arr((2, 1, 4, 4), 2), {"scale": 0.3}),
    ("causal", (1, 2, 4, 3), (1, 2, 6, 3), (1, 2, 6, 3), None, {"is_causal": True}),
    ("3d", (3, 5, 4), (3, 5, 4), (3, 5, 2), None, {}),
    ("gqa", (1, 4, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4), None, {"enable_gqa": True}),
    ("masked_row", (1, 1, 3, 4), (1, 1, 3, 4), (1, 1, 3, 4), np.array([[1, 1, 0], [0, 0, 0], [1, 0, 1]], np.bool_), {}),
]


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "graph"])
@pytest.mark.parametrize("case", SDPA, ids=[c[0] for c in SDPA])
def test_sdpa_vs_torch(case, compiled):
    _, qs, ks, vs, mask, kw = case
    q, k, v = (_pair(_arr(s, i)) for i, s in enumerate((qs, ks, vs)))
    masks = _pair(mask, grad=False) if mask is not None else (None, None)

    def lf_fn(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, **kw)

    run = lf.compile(lf_fn) if compiled else lf_fn
    yl = run(q[0], k[0], v[0], masks[0])
    yt = torch.nn.functional.scaled_dot_product_attention(q[1], k[1], v[1], attn_mask=masks[1], **kw)
    _close(yl.detach().numpy(), yt.detach().numpy(), "forward")
    g = _arr(tuple(yt.shape), 9)
    (yl * lf.tensor(g)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    for (a, b), name in zip((q, k, v), "qkv"):
        _close(a.grad.numpy(), b.grad.numpy(), f"grad of {name}")


def test_sdpa_dropout_is_fresh_and_reproducible():
    s, p = 8, 0.5
    q = lf.zeros(2, 16, 4)  # uniform weights 1/S
    v = lf.eye(s).reshape(1, s, s).expand(2, s, s)
    lf.manual_seed(3)
    a = F.scaled_dot_product_attention(q, lf.zeros(2, s, 4), v, dropout_p=p).numpy()
    b = F.scaled_dot_product_attention(q, lf.zeros(2, s, 4), v, dropout_p=p).numpy()
    lf.manual_seed(3)
    a2 = F.scaled_dot_product_attention(q, lf.zeros(2, s, 4), v, dropout_p=p).numpy()
    np.testing.assert_array_equal(a, a2)
    assert not np.array_equal(a, b)
    kept = 1.0 / (s * (1 - p))
    assert np.all(np.isclose(a, 0.0) | np.isclose(a, kept))
    assert 0.35 < np.isclose(a, 0.0).mean() < 0.65


# ---------------------------------------------------------------- MultiheadAttention
# (id, constructor kwargs, (query, key, value) shapes, self-attention?)
MHA = [
    ("self", {"embed_dim": 8, "num_heads": 2}, ((5, 2, 8),) * 3, True),
    ("batch_first", {"embed_dim": 8, "num_heads": 4, "batch_first": True}, ((2, 5, 8), (2, 6, 8), (2, 6, 8)), False),
    ("kdim_vdim", {"embed_dim": 6, "num_heads": 3, "kdim": 4, "vdim": 5}, ((3, 2, 6), (4, 2, 4), (4, 2, 5)), False),
    ("nobias", {"embed_dim": 8, "num_heads": 2, "bias": False, "batch_first": True}, ((2, 4, 8),) * 3, True),
    (
        "bias_kv_zero_attn",
        {"embed_dim": 8, "num_heads": 2, "add_bias_kv": True, "add_zero_attn": True},
        ((4, 2, 8), (5, 2, 8), (5, 2, 8)),
        False,
    ),
    ("unbatched", {"embed_dim": 8, "num_heads": 2}, ((4, 8),) * 3, True),
]


def _pair_module(ctor):
    torch.manual_seed(0)
    tm, lm = ctor(torch.nn), ctor(lf.nn)
    with torch.no_grad():  # non-zero biases so that every parameter is exercised
        for p in tm.parameters():
            p.add_(0.1 * torch.randn(p.shape))
    lm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    return lm, tm


def _masks(kind, n, lq, s, heads):
    if kind == "none":
        return {}
    if kind == "bool":
        kpm = np.zeros((n, s), np.bool_)
        kpm[-1, -2:] = True
        am = np.triu(np.ones((lq, s), np.bool_), 1)
        return {"key_padding_mask": kpm, "attn_mask": am}
    kpm = _arr((n, s), 5)
    am = _arr((n * heads, lq, s), 6)
    return {"key_padding_mask": kpm, "attn_mask": am}


def _run_mha(case, mask_kind, need_weights, average, compiled, train):
    _, kw, shapes, self_attn = case
    lm, tm = _pair_module(lambda m: m.MultiheadAttention(**kw))
    lm.train(train)
    tm.train(train)
    arrs = [_arr(s, i) for i, s in enumerate(shapes)]
    if self_attn:
        arrs = [arrs[0]] * 3
    pairs = [_pair(a) for a in arrs[:1]] * 3 if self_attn else [_pair(a) for a in arrs]
    batched = len(shapes[0]) == 3
    bf = kw.get("batch_first", False)
    n = shapes[0][0 if bf else 1] if batched else 1
    lq = shapes[0][1 if bf else 0] if batched else shapes[0][0]
    s = shapes[1][1 if bf else 0] if batched else shapes[1][0]
    m = _masks(mask_kind, n, lq, s, kw["num_heads"]) if batched else {}
    lmask = {k: lf.tensor(v) for k, v in m.items()}
    tmask = {k: torch.tensor(v) for k, v in m.items()}
    run = lf.compile(lm) if compiled else lm
    ol, wl = run(*[p[0] for p in pairs], need_weights=need_weights, average_attn_weights=average, **lmask)
    ot, wt = tm(*[p[1] for p in pairs], need_weights=need_weights, average_attn_weights=average, **tmask)
    _close(ol.detach().numpy(), ot.detach().numpy(), "attn_output")
    if need_weights:
        _close(wl.detach().numpy(), wt.detach().numpy(), "attn_weights")
    else:
        assert wl is None and wt is None
    g = _arr(tuple(ot.shape), 7)
    (ol * lf.tensor(g)).sum().backward()
    (ot * torch.tensor(g)).sum().backward()
    tp = dict(tm.named_parameters())
    for k, p in lm.named_parameters():
        _close(p.grad.numpy(), tp[k].grad.numpy(), f"grad of {k}")
    seen = set()
    for i, (a, b) in enumerate(pairs):
        if id(a) not in seen:
            seen.add(id(a))
            _close(a.grad.numpy(), b.grad.numpy(), f"grad of input {i}")


@pytest.mark.parametrize("case", MHA, ids=[c[0] for c in MHA])
def test_mha_keys_shapes_repr_init(case):
    _, kw, _, _ = case
    lm, tm = lf.nn.MultiheadAttention(**kw), torch.nn.MultiheadAttention(**kw)
    assert [(k, tuple(v.shape)) for k, v in lm.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in tm.state_dict().items()
    ]
    assert repr(lm) == repr(tm)
    e = kw["embed_dim"]
    if lm.in_proj_weight is not None:
        bound = math.sqrt(6.0 / (e + 3 * e))  # xavier_uniform_ on (3E, E)
        w = lm.in_proj_weight.detach().numpy()
        assert np.abs(w).max() <= bound and w.std() > 0.4 * bound
    if lm.in_proj_bias is not None:
        assert not lm.in_proj_bias.detach().numpy().any() and not lm.out_proj.bias.detach().numpy().any()


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "graph"])
@pytest.mark.parametrize("case", MHA, ids=[c[0] for c in MHA])
def test_mha_vs_torch(case, compiled):
    _run_mha(case, "bool" if case[0] in ("self", "batch_first") else "none", True, True, compiled, True)


@pytest.mark.parametrize(
    "mask_kind,need_weights,average",
    [
        ("bool", False, True),
        ("float", True, False),
        ("float", False, True),
        ("none", True, False),
    ],
)
def test_mha_masks_and_weights_vs_torch(mask_kind, need_weights, average):
    _run_mha(MHA[1], mask_kind, need_weights, average, False, True)


def test_mha_is_causal_hint_vs_torch():
    lm, tm = _pair_module(lambda m: m.MultiheadAttention(8, 2, batch_first=True))
    x = _arr((2, 5, 8), 1)
    mask = ~_causal(5, 5)
    ol = lm(lf.tensor(x), lf.tensor(x), lf.tensor(x), attn_mask=lf.tensor(mask), is_causal=True, need_weights=False)[0]
    ot = tm(
        torch.tensor(x),
        torch.tensor(x),
        torch.tensor(x),
        attn_mask=torch.tensor(mask),
        is_causal=True,
        need_weights=False,
    )[0]
    _close(ol.detach().numpy(), ot.detach().numpy())
    with pytest.raises(RuntimeError, match="attn_mask"):
        lm(lf.tensor(x), lf.tensor(x), lf.tensor(x), is_causal=True)


def test_mha_dropout_only_in_training():
    m = lf.nn.MultiheadAttention(8, 2, dropout=0.5, batch_first=True)
    x = lf.tensor(_arr((2, 5, 8), 0))
    m.eval()
    a, b = m(x, x, x)[0].detach().numpy(), m(x, x, x)[0].detach().numpy()
    np.testing.assert_array_equal(a, b)
    m.train()
    assert not np.array_equal(m(x, x, x)[0].detach().numpy(), m(x, x, x)[0].detach().numpy())


# ---------------------------------------------------------------- Transformer encoder
ENC = [
    (
        "post_norm_nobias",
        {"d_model": 8, "nhead": 2, "dim_feedforward": 16, "dropout": 0.0, "bias": False, "layer_norm_eps": 1e-3},
    ),
    (
        "pre_norm_gelu_bf",
        {
            "d_model": 8,
            "nhead": 4,
            "dim_feedforward": 12,
            "dropout": 0.0,
            "activation": "gelu",
            "norm_first": True,
            "batch_first": True,
        },
    ),
]


def _encoder(m, kw):
    return m.TransformerEncoder(
        m.TransformerEncoderLayer(**kw), num_layers=2, norm=m.LayerNorm(kw["d_model"]), enable_nested_tensor=False
    )


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "graph"])
@pytest.mark.parametrize("case", ENC, ids=[c[0] for c in ENC])
def test_transformer_encoder_vs_torch(case, compiled):
    _, kw = case
    lm, tm = _pair_module(lambda m: _encoder(m, kw))
    assert [(k, tuple(v.shape)) for k, v in lm.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in tm.state_dict().items()
    ]
    assert repr(lm) == repr(tm)
    assert lm.layers[0].linear1.weight is not lm.layers[1].linear1.weight
    bf = kw.get("batch_first", False)
    xs = (2, 5, 8) if bf else (5, 2, 8)
    xl, xt = _pair(_arr(xs, 1))
    kpm = np.zeros((2, 5), np.bool_)
    kpm[1, -1] = True
    mask = ~_causal(5, 5)
    run = lf.compile(lm) if compiled else lm
    yl = run(xl, mask=lf.tensor(mask), src_key_padding_mask=lf.tensor(kpm))
    yt = tm(xt, mask=torch.tensor(mask), src_key_padding_mask=torch.tensor(kpm))
    _close(yl.detach().numpy(), yt.detach().numpy(), "forward")
    g = _arr(xs, 2)
    (yl * lf.tensor(g)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    _close(xl.grad.numpy(), xt.grad.numpy(), "input grad")
    tp = dict(tm.named_parameters())
    for k, p in lm.named_parameters():
        _close(p.grad.numpy(), tp[k].grad.numpy(), f"grad of {k}")


def test_encoder_layer_eval_disables_dropout_like_torch():
    kw = {"d_model": 8, "nhead": 2, "dim_feedforward": 16, "dropout": 0.3}
    lm, tm = _pair_module(lambda m: m.TransformerEncoderLayer(**kw))
    lm.eval()
    tm.eval()
    x = _arr((4, 2, 8), 3)
    xt = torch.tensor(x, requires_grad=True)  # grad enabled: torch takes its regular (non fast-path) route
    _close(lm(lf.tensor(x)).detach().numpy(), tm(xt).detach().numpy())


# ---------------------------------------------------------------- bad input
def test_bad_input_names_layer_and_shapes():
    m = lf.nn.MultiheadAttention(8, 2)
    with pytest.raises(lf.ShapeError, match=r"MultiheadAttention\(embed_dim=8.*\(L, N, 8\).*\[5, 2, 6\]"):
        m(lf.zeros(5, 2, 6), lf.zeros(5, 2, 8), lf.zeros(5, 2, 8))
    with pytest.raises(lf.ShapeError, match=r"key_padding_mask of shape \[2, 5\].*\[2, 4\]"):
        x = lf.zeros(5, 2, 8)
        m(x, x, x, key_padding_mask=lf.zeros(2, 4, dtype=lf.bool))
    with pytest.raises(lf.ShapeError, match=r"2D attn_mask.*\[5, 5\]"):
        m(x, x, x, attn_mask=lf.zeros(4, 5, dtype=lf.bool))
    layer = lf.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
    with pytest.raises(lf.ShapeError, match=r"TransformerEncoderLayer.*\(N, S, 8\).*\[2, 5, 4\]"):
        layer(lf.zeros(2, 5, 4))
    with pytest.raises(ValueError, match="divisible"):
        lf.nn.MultiheadAttention(8, 3)
    q = lf.zeros(1, 2, 3, 4)
    with pytest.raises(ValueError, match="is_causal"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=lf.ones(3, 3, dtype=lf.bool), is_causal=True)
    with pytest.raises(lf.ShapeError, match="cannot be broadcast"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=lf.ones(2, 3, dtype=lf.bool))
    with pytest.raises(lf.ShapeError):
        F.scaled_dot_product_attention(q, lf.zeros(1, 2, 3, 5), q)
