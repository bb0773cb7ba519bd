"""TransformerDecoderLayer / TransformerDecoder / Transformer against torch 2.13 with torch's weights loaded:
state_dict keys, repr, forward, input and parameter gradients (eager and compiled), masks and the causal mask
helper, eval-mode dropout, default init, bad input. Small models so the file stays fast."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import lazyflow as lf


def _close(got, want, what=""):
    want = np.asarray(want, np.float64)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=2e-5, atol=2e-5, err_msg=what)


def _arr(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _pair_module(ctor):
    torch.manual_seed(0)
    tm, lm = ctor(torch.nn), ctor(lf.nn)
    with torch.no_grad():  # non-zero biases so that every parameter is exercised
        for p in tm.parameters():
            p.add_(0.1 * torch.randn(p.shape))
    lm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    return lm, tm


def _same_structure(lm, tm):
    assert [(k, tuple(v.shape)) for k, v in lm.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in tm.state_dict().items()
    ]
    assert repr(lm) == repr(tm)


def _check_grads(lm, tm, pairs, yl, yt, seed):
    g = _arr(tuple(yt.shape), seed)
    (yl * lf.tensor(g)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    for i, (a, b) in enumerate(pairs):
        _close(a.grad.numpy(), b.grad.numpy(), f"grad of input {i}")
    tp = dict(tm.named_parameters())
    for k, p in lm.named_parameters():
        _close(p.grad.numpy(), tp[k].grad.numpy(), f"grad of {k}")


def _inputs(shapes, seed):
    arrs = [_arr(s, seed + i) for i, s in enumerate(shapes)]
    return [(lf.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)) for a in arrs]


DEC = [
    ("post-relu-seqfirst", dict(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0)),
    (
        "pre-gelu-batchfirst",
        dict(d_model=8, nhead=4, dim_feedforward=12, dropout=0.0, activation="gelu", norm_first=True, batch_first=True),
    ),
]


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "graph"])
@pytest.mark.parametrize("case", DEC, ids=[c[0] for c in DEC])
def test_transformer_decoder_vs_torch(case, compiled):
    _, kw = case

    def ctor(m):
        return m.TransformerDecoder(m.TransformerDecoderLayer(**kw), num_layers=2, norm=m.LayerNorm(8))

    lm, tm = _pair_module(ctor)
    _same_structure(lm, tm)
    assert lm.layers[0].linear1.weight is not lm.layers[1].linear1.weight
    bf = kw.get("batch_first", False)
    tshape, mshape = ((2, 5, 8), (2, 6, 8)) if bf else ((5, 2, 8), (6, 2, 8))
    (tl, tt), (ml, mt) = _inputs([tshape, mshape], 10)
    mkpm = np.zeros((2, 6), np.bool_)
    mkpm[1, -2:] = True
    tkpm = np.zeros((2, 5), np.bool_)
    tkpm[0, -1] = True
    lmask, tmask = (
        lf.nn.Transformer.generate_square_subsequent_mask(5),
        torch.nn.Transformer.generate_square_subsequent_mask(5),
    )
    run = lf.compile(lm) if compiled else lm
    common = dict(tgt_is_causal=True)
    yl = run(
        tl, ml, tgt_mask=lmask, tgt_key_padding_mask=lf.tensor(tkpm), memory_key_padding_mask=lf.tensor(mkpm), **common
    )
    yt = tm(
        tt,
        mt,
        tgt_mask=tmask,
        tgt_key_padding_mask=torch.tensor(tkpm),
        memory_key_padding_mask=torch.tensor(mkpm),
        **common,
    )
    _close(yl.detach().numpy(), yt.detach().numpy(), "forward")
    _check_grads(lm, tm, [(tl, tt), (ml, mt)], yl, yt, 20)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "graph"])
def test_transformer_vs_torch_with_loaded_weights(compiled):
    kw = dict(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=2, dim_feedforward=16, dropout=0.0)
    lm, tm = _pair_module(lambda m: m.Transformer(**kw))
    _same_structure(lm, tm)
    (sl, st), (tl, tt) = _inputs([(6, 2, 8), (4, 2, 8)], 30)
    mem_mask = np.zeros((4, 6), np.float32)
    mem_mask[:, 0] = -1.5  # a float mask added to the scores
    run = lf.compile(lm) if compiled else lm
    yl = run(sl, tl, tgt_mask=lf.nn.Transformer.generate_square_subsequent_mask(4), memory_mask=lf.tensor(mem_mask))
    yt = tm(
        st, tt, tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(4), memory_mask=torch.tensor(mem_mask)
    )
    _close(yl.detach().numpy(), yt.detach().numpy(), "forward")
    _check_grads(lm, tm, [(sl, st), (tl, tt)], yl, yt, 40)


def test_decoder_layer_unbatched_and_eval_dropout():
    kw = dict(d_model=8, nhead=2, dim_feedforward=16, dropout=0.3)
    lm, tm = _pair_module(lambda m: m.TransformerDecoderLayer(**kw))
    lm.eval()
    tm.eval()
    t, m = _arr((4, 8), 50), _arr((3, 8), 51)
    bmask = np.triu(np.ones((4, 4), np.bool_), 1)  # bool mask: True = not allowed
    yt = tm(torch.tensor(t, requires_grad=True), torch.tensor(m), tgt_mask=torch.tensor(bmask))
    yl = lm(lf.tensor(t), lf.tensor(m), tgt_mask=lf.tensor(bmask))
    assert tuple(yl.shape) == (4, 8)
    _close(yl.detach().numpy(), yt.detach().numpy(), "eval forward")


def test_generate_square_subsequent_mask_matches_torch():
    for n in (1, 4):
        got = lf.nn.Transformer.generate_square_subsequent_mask(n)
        np.testing.assert_array_equal(got.numpy(), torch.nn.Transformer.generate_square_subsequent_mask(n).numpy())
        assert got.dtype is lf.float32
    assert lf.nn.Transformer.generate_square_subsequent_mask(3, dtype=lf.float64).dtype is lf.float64


def test_transformer_default_init_is_xavier_uniform():
    lm = lf.nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16)
    w = lm.decoder.layers[0].linear2.weight.detach().numpy()  # (8, 16): xavier bound 0.5, Linear's own 0.25
    assert np.abs(w).max() <= math.sqrt(6 / 24) and np.abs(w).max() > 0.25
    for name, p in lm.named_parameters():
        if p.dim() > 1:
            fan_out, fan_in = p.shape[0], p.shape[1]
            assert np.abs(p.detach().numpy()).max() <= math.sqrt(6 / (fan_in + fan_out)) + 1e-7, name


def test_bad_input():
    m = lf.nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16)
    with pytest.raises(lf.ShapeError, match="batch number of src and tgt"):
        m(lf.zeros(5, 2, 8), lf.zeros(4, 3, 8))
    with pytest.raises(lf.ShapeError, match="d_model=8"):
        m(lf.zeros(5, 2, 8), lf.zeros(4, 2, 6))
    with pytest.raises(RuntimeError):  # torch raises RuntimeError for both
        torch.nn.Transformer(8, 2, 1, 1, 16)(torch.zeros(5, 2, 8), torch.zeros(4, 3, 8))
    layer = lf.nn.TransformerDecoderLayer(8, 2, 16, batch_first=True)
    with pytest.raises(lf.ShapeError, match=r"TransformerDecoderLayer.*\(N, T, 8\).*\[2, 5, 4\]"):
        layer(lf.zeros(2, 5, 4), lf.zeros(2, 3, 8))
    with pytest.raises(lf.ShapeError, match=r"\[3\]"):
        layer(lf.zeros(2, 5, 8), lf.zeros(3))
    with pytest.raises(RuntimeError, match="relu/gelu"):
        lf.nn.TransformerDecoderLayer(8, 2, activation="tanh")
    with pytest.raises(TypeError, match="lazyflow Tensor"):
        layer(np.zeros((2, 5, 8)), lf.zeros(2, 3, 8))  # type: ignore[arg-type]
