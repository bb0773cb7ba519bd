"""nn.utils.rnn PackedSequence, pack_padded_sequence, pad_packed_sequence, pack_sequence, unpack_sequence,
unpad_sequence, and RNN/LSTM/GRU on packed input, against torch 2.13: packed layout, values and gradients, sorted
and unsorted batches, bidirectional and projected LSTMs, eager and compiled, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.utils.rnn as TR

import lazyflow as lf
import lazyflow.nn.utils.rnn as R

RNG = np.random.default_rng(0)
X = RNG.standard_normal((5, 4, 3)).astype(np.float32)


def _eq(a, b, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("lengths,enforce", [([5, 4, 2, 1], True), ([2, 5, 1, 4], False), ([3, 3, 3, 3], True)])
@pytest.mark.parametrize("batch_first", [False, True])
def test_pack_and_pad_vs_torch(lengths, enforce, batch_first):
    x = X.transpose(1, 0, 2).copy() if batch_first else X
    xt = torch.tensor(x, requires_grad=True)
    tp = TR.pack_padded_sequence(xt, lengths, batch_first, enforce)
    xl = lf.tensor(x, requires_grad=True)
    lp = R.pack_padded_sequence(xl, lf.tensor(lengths), batch_first, enforce)
    _eq(lp.data, tp.data)
    np.testing.assert_array_equal(lp.batch_sizes.numpy(), tp.batch_sizes.numpy())
    assert lp.batch_sizes.dtype is lf.int64
    for a, b in [(lp.sorted_indices, tp.sorted_indices), (lp.unsorted_indices, tp.unsorted_indices)]:
        assert (a is None) == (b is None) and (a is None or (a.numpy() == b.numpy()).all())
    tpad, tlen = TR.pad_packed_sequence(tp, batch_first, -1.0, 7)
    lpad, llen = R.pad_packed_sequence(lp, batch_first, -1.0, 7)
    _eq(lpad, tpad)
    np.testing.assert_array_equal(llen.numpy(), tlen.numpy())
    g = RNG.standard_normal(tuple(tpad.shape)).astype(np.float32)
    (tpad * torch.tensor(g)).sum().backward()
    (lpad * lf.tensor(g)).sum().backward()
    _eq(xl.grad, xt.grad)


def test_pack_sequence_unpack_and_unpad():
    seqs = [RNG.standard_normal((n, 2)).astype(np.float32) for n in (2, 4, 1)]
    tp = TR.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted=False)
    lp = R.pack_sequence([lf.tensor(s) for s in seqs], enforce_sorted=False)
    _eq(lp.data, tp.data)
    for a, s in zip(R.unpack_sequence(lp), seqs):
        np.testing.assert_array_equal(a.numpy(), s)
    padded = R.pad_sequence([lf.tensor(s) for s in seqs], batch_first=True)
    for a, s in zip(R.unpad_sequence(padded, [2, 4, 1], batch_first=True), seqs):
        np.testing.assert_array_equal(a.numpy(), s)
    assert isinstance(lp, tuple) and lp._fields == tp._fields  # torch's namedtuple fields
    assert lp.to(lf.float64).data.dtype is lf.float64


def _layer_pair(kind, **kw):
    torch.manual_seed(0)
    tm = getattr(torch.nn, kind)(3, 4, **kw)
    lm = getattr(lf.nn, kind)(3, 4, **kw)
    lm.load_state_dict({k: lf.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return lm, tm


@pytest.mark.parametrize(
    "kind,kw,enforce",
    [
        ("LSTM", {"num_layers": 2, "bidirectional": True}, False),
        ("LSTM", {"proj_size": 2}, True),
        ("GRU", {"bidirectional": True}, False),
        ("RNN", {"num_layers": 2, "nonlinearity": "relu"}, True),
    ],
    ids=["lstm-2l-bi", "lstm-proj", "gru-bi", "rnn-relu-2l"],
)
def test_recurrent_layers_on_packed_input_vs_torch(kind, kw, enforce):
    lm, tm = _layer_pair(kind, **kw)
    lengths = [5, 4, 2, 1] if enforce else [2, 5, 1, 4]
    xt = torch.tensor(X, requires_grad=True)
    xl = lf.tensor(X, requires_grad=True)
    dirs = 2 if kw.get("bidirectional") else 1
    h0 = RNG.standard_normal((kw.get("num_layers", 1) * dirs, 4, kw.get("proj_size") or 4)).astype(np.float32)
    hx_t = (torch.tensor(h0), torch.zeros(h0.shape[0], 4, 4)) if kind == "LSTM" else torch.tensor(h0)
    hx_l = (lf.tensor(h0), lf.zeros(h0.shape[0], 4, 4)) if kind == "LSTM" else lf.tensor(h0)
    to, th = tm(TR.pack_padded_sequence(xt, lengths, enforce_sorted=enforce), hx_t)
    lo, lh = lm(R.pack_padded_sequence(xl, lengths, enforce_sorted=enforce), hx_l)
    assert isinstance(lo, R.PackedSequence)
    _eq(lo.data, to.data)
    finals_t = th if isinstance(th, tuple) else (th,)
    finals_l = lh if isinstance(lh, tuple) else (lh,)
    for a, b in zip(finals_l, finals_t):
        _eq(a, b)
    tpad, _ = TR.pad_packed_sequence(to)
    lpad, _ = R.pad_packed_sequence(lo)
    g = RNG.standard_normal(tuple(tpad.shape)).astype(np.float32)
    ((tpad * torch.tensor(g)).sum() + sum(f.sum() for f in finals_t)).backward()
    ((lpad * lf.tensor(g)).sum() + sum(f.sum() for f in finals_l)).backward()
    _eq(xl.grad, xt.grad, rtol=1e-4, atol=1e-5)
    tg = dict(tm.named_parameters())
    for k, p in lm.named_parameters():
        _eq(p.grad, tg[k].grad, rtol=1e-4, atol=1e-5)


def test_packed_gru_compiled_matches_torch():
    lm, tm = _layer_pair("GRU")
    lengths = [3, 5, 1, 4]

    def f(x):
        out, h = lm(R.pack_padded_sequence(x, lengths, enforce_sorted=False))
        return R.pad_packed_sequence(out, batch_first=True)[0], h

    xl = lf.tensor(X, requires_grad=True)
    yl, hl = lf.compile(f)(xl)
    to, th = tm(TR.pack_padded_sequence(torch.tensor(X), lengths, enforce_sorted=False))
    _eq(yl, TR.pad_packed_sequence(to, batch_first=True)[0])
    _eq(hl, th)
    (yl.sum() + hl.sum()).backward()
    assert np.isfinite(xl.grad.numpy()).all() and np.abs(xl.grad.numpy()[4, 2]).sum() == 0  # past length 1: no grad


def test_bad_input():
    with pytest.raises(lf.ShapeError, match="sorted in decreasing order"):
        R.pack_padded_sequence(lf.tensor(X), [2, 5, 1, 4])
    with pytest.raises(lf.ShapeError, match="greater than 0"):
        R.pack_padded_sequence(lf.tensor(X), [5, 4, 0, 0])
    with pytest.raises(lf.ShapeError, match="one length each"):
        R.pack_padded_sequence(lf.tensor(X), [5, 4])
    with pytest.raises(lf.ShapeError, match="exceeds the padded length"):
        R.pack_padded_sequence(lf.tensor(X), [6, 4, 2, 1])
    p = R.pack_padded_sequence(lf.tensor(X), [5, 4, 2, 1])
    with pytest.raises(ValueError, match="total_length"):
        R.pad_packed_sequence(p, total_length=3)
    with pytest.raises(lf.ShapeError, match="Expected hidden size"):
        lf.nn.GRU(3, 4)(p, lf.zeros(1, 3, 4))
    with pytest.raises(lf.ShapeError, match=r"sum\(lengths\), 2"):
        lf.nn.GRU(2, 4)(p)

    def traced_lengths(x, n):
        return R.pack_padded_sequence(x, n).data

    with pytest.raises(lf.ShapeError, match="concrete"):
        lf.compile(traced_lengths)(lf.tensor(X), lf.tensor([5, 4, 2, 1]))
