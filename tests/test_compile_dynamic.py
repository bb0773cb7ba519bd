"""``lf.compile(..., dynamic=True)``: batch sizes share programs by padding, only where that provably changes no
result. References: numpy (the MLP's maths), torch (modules with the same weights), and the module run eagerly on
the unpadded batch for the refusal cases (the claim there is "results unchanged")."""

import warnings

import numpy as np
import pytest
import torch

import lazyflow as lf
from lazyflow import nn


def _np(t):
    return t.detach().numpy()


def _mlp():
    lf.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))


def _mlp_numpy(m, x):
    sd = {k: _np(v).astype(np.float64) for k, v in m.state_dict().items()}
    h = np.tanh(x @ sd["0.weight"].T + sd["0.bias"])
    return h @ sd["2.weight"].T + sd["2.bias"]


def _calls(cm, sizes, make):
    rng = np.random.default_rng(0)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        outs = [(n, x, cm(lf.tensor(x))) for n in sizes for x in [make(rng, n)]]
    return outs, [str(m.message) for m in w if "dynamic=True" in str(m.message)]


def test_mlp_shares_programs_across_batch_sizes_and_matches_numpy():
    m = _mlp()
    cm = lf.compile(m, dynamic=True)
    outs, warned = _calls(cm, [64, 17, 64, 30, 1, 100, 70], lambda r, n: r.standard_normal((n, 8), np.float32))
    assert warned == []
    for n, x, y in outs:
        assert tuple(y.shape) == (n, 3)
        np.testing.assert_allclose(_np(y), _mlp_numpy(m, x), rtol=1e-5, atol=1e-5)
    info = cm.cache_info()
    # 64 exactly; 17, 30, 1 pad to 64; 100 is larger: rounded up to 128; 70 pads to 128
    assert info.compiles == 2 and info.variants == 2


def test_a_small_size_that_recurs_gets_its_own_program():
    cm = lf.compile(_mlp(), dynamic=True)
    outs, _ = _calls(cm, [64] + [17] * 6, lambda r, n: r.standard_normal((n, 8), np.float32))
    # 17 runs padded to 64 four times (a last partial batch would stop there), then gets 32 of its own
    assert cm.cache_info().compiles == 2 and cm.cache_info().hits == 5
    for _n, x, y in outs:
        np.testing.assert_allclose(_np(y), _mlp_numpy(cm.module, x), rtol=1e-5, atol=1e-5)


def test_static_default_compiles_every_size():
    cm = lf.compile(_mlp())
    _calls(cm, [64, 17, 30], lambda r, n: r.standard_normal((n, 8), np.float32))
    assert cm.cache_info().compiles == 3


def test_growing_sizes_cost_log2_compiles():
    cm = lf.compile(_mlp(), dynamic=True)
    outs, _ = _calls(cm, list(range(5, 70, 4)), lambda r, n: r.standard_normal((n, 8), np.float32))
    # 5 exactly, then powers of two: 16 (9, 13), 32, 64, 128 (65, 69)
    assert cm.cache_info().compiles == 5
    for _n, x, y in outs:
        np.testing.assert_allclose(_np(y), _mlp_numpy(cm.module, x), rtol=1e-5, atol=1e-5)


def test_gradients_through_a_padded_call_match_torch():
    m = _mlp()
    tm = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3)).double()
    tm.load_state_dict({k: torch.tensor(_np(v), dtype=torch.float64) for k, v in m.state_dict().items()})
    cm = lf.compile(m, dynamic=True)
    rng = np.random.default_rng(1)
    cm(lf.randn(32, 8, requires_grad=True))  # compiles 32 (a signature whose input needs a gradient)
    x = rng.standard_normal((5, 8)).astype(np.float32)  # runs padded to 32
    xt = lf.tensor(x, requires_grad=True)
    (cm(xt) ** 2).sum().backward()
    tx = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    (tm(tx) ** 2).sum().backward()
    assert cm.cache_info().compiles == 1
    np.testing.assert_allclose(_np(xt.grad), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    for (name, p), tp in zip(m.named_parameters(), tm.parameters()):
        np.testing.assert_allclose(_np(p.grad), tp.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)


def test_cnn_in_eval_mode_matches_torch_with_one_program():
    lf.manual_seed(0)
    m = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(128, 5)
    ).eval()
    tm = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(128, 5),
    ).eval()
    sd = {k: _np(v) for k, v in m.state_dict().items()}
    sd["1.running_mean"] = np.linspace(-0.5, 0.5, 8).astype(np.float32)
    sd["1.running_var"] = np.linspace(0.5, 2.0, 8).astype(np.float32)
    m.load_state_dict({k: lf.tensor(v) for k, v in sd.items()})
    tm.load_state_dict({k: torch.tensor(v) for k, v in sd.items()})
    cm = lf.compile(m, dynamic=True)
    outs, warned = _calls(cm, [16, 5, 16, 3], lambda r, n: r.standard_normal((n, 3, 8, 8), np.float32))
    assert warned == []
    assert cm.cache_info().compiles == 1
    for _n, x, y in outs:
        np.testing.assert_allclose(_np(y), tm(torch.tensor(x)).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_transformer_with_embedding_and_heads_is_provable():
    lf.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, dropout=0.0)
    m = nn.Sequential(nn.Embedding(50, 16), nn.TransformerEncoder(layer, 2), nn.LayerNorm(16)).eval()
    cm = lf.compile(m, dynamic=True)
    outs, warned = _calls(cm, [8, 3, 8, 5], lambda r, n: r.integers(0, 50, (n, 7)))
    assert warned == []
    assert cm.cache_info().compiles == 1
    for _n, x, y in outs:
        np.testing.assert_allclose(_np(y), _np(m(lf.tensor(x))), rtol=1e-4, atol=1e-5)


class _DivByBatch(nn.Module):
    def forward(self, x):
        return x / x.shape[0]


class _CenterOverBatch(nn.Module):
    def forward(self, x):
        return x - x.mean(0)


class _RowIndex(nn.Module):
    def forward(self, x):
        return x + lf.arange(x.shape[0], dtype=lf.float32)[:, None]


@pytest.mark.parametrize(
    "make, reason",
    [
        (_DivByBatch, "constant that depends on the batch size"),
        (_CenterOverBatch, "reduces over the batch axis"),
        (lambda: nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)).train(), "reduces over the batch axis"),
        (lambda: nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)).train(), ""),
    ],
)
def test_unprovable_programs_warn_once_and_compile_each_size(make, reason):
    lf.manual_seed(0)
    m = make()
    cm = lf.compile(m, dynamic=True)
    sizes = [8, 3, 8, 3]
    got = []
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in sizes:
            x = lf.randn(n, 4)
            lf.manual_seed(n)
            y = cm(x)
            lf.manual_seed(n)
            got.append((y, m(x)))
    msgs = [str(x.message) for x in w if "dynamic=True" in str(x.message)]
    assert len(msgs) == 1 and reason in msgs[0], msgs
    assert "test_compile_dynamic.py" in msgs[0]  # names the caller's line
    assert cm.cache_info().compiles == 2  # exact sizes, no padding
    for y, ref in got:
        np.testing.assert_allclose(_np(y), _np(ref), rtol=1e-5, atol=1e-6)


def test_positional_values_pad_correctly():
    cm = lf.compile(_RowIndex(), dynamic=True)
    outs, _ = _calls(cm, [8, 3], lambda r, n: r.standard_normal((n, 2), np.float32))
    for n, x, y in outs:
        np.testing.assert_allclose(_np(y), x + np.arange(n, dtype=np.float32)[:, None], rtol=1e-6)


def test_index_checks_still_raise_on_a_padded_call():
    emb = nn.Embedding(10, 4)
    cm = lf.compile(emb, dynamic=True)
    cm(lf.zeros(8, 3, dtype=lf.int64))
    with pytest.raises(IndexError, match="out of range"):
        cm(lf.tensor([[1, 2, 11]]))  # padded to 8 rows with copies of the bad row
    assert cm.cache_info().compiles == 1


def test_functions_of_several_tensors_and_python_args():
    @lf.compile(dynamic=True)
    def f(x, y, scale):
        return (x * y).sum(1) * scale, x

    rng = np.random.default_rng(0)
    for n in (16, 4, 9):
        a, b = rng.standard_normal((n, 3), np.float32), rng.standard_normal((n, 3), np.float32)
        s, x = f(lf.tensor(a), lf.tensor(b), 2.0)
        np.testing.assert_allclose(_np(s), (a * b).sum(1) * 2.0, rtol=1e-5)
        np.testing.assert_array_equal(_np(x), a)
    assert f.cache_info().compiles == 1


def test_an_output_with_a_grouped_batch_axis_is_cut_to_its_rows():
    # (batch, 3) -> (batch * 3,): each batch row owns 3 consecutive output rows
    f = lf.compile(lambda x: (x * 2).reshape(-1), dynamic=True)
    rng = np.random.default_rng(0)
    for n in (8, 3):
        x = rng.standard_normal((n, 3)).astype(np.float32)
        np.testing.assert_array_equal(_np(f(lf.tensor(x))), (x * 2).reshape(-1))
    assert f.cache_info().compiles == 1


def test_bad_dynamic_value():
    with pytest.raises(ValueError, match="dynamic must be None, False or True"):
        lf.compile(_mlp(), dynamic="batch")


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.flip(0),
        lambda x: x.cumsum(0),
        lambda x: x.sort(0)[0],
        lambda x: x @ x.T,
        lambda x: x[1:],
        lambda x: x.roll(1, 0),
        lambda x: x.reshape(-1)[:5],
        lambda x: x.reshape(-1).sum(),
        lambda x: x.reshape(2, -1),
        lambda x: x * (1.0 / x.shape[0]),
        lambda x: x + lf.arange(x.shape[0], dtype=lf.float32).flip(0)[:, None],
        lambda x: x.softmax(0),
        lambda x: x.T.softmax(1).T,
    ],
    ids=[
        "flip",
        "cumsum",
        "sort",
        "gram",
        "slice",
        "roll",
        "flat_slice",
        "flat_sum",
        "regroup",
        "scale",
        "rev_iota",
        "softmax_rows",
        "softmax_T",
    ],
)
def test_programs_that_mix_rows_are_never_padded(fn):
    # an adversary's list: each mixes rows (or depends on the batch size) in a different way; padding any of them
    # would change a result, so each size compiles exactly and matches eager
    f = lf.compile(fn, dynamic=True)
    rng = np.random.default_rng(0)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in (8, 4, 8, 4):
            x = rng.standard_normal((n, 4)).astype(np.float32)
            np.testing.assert_allclose(_np(f(lf.tensor(x))), _np(fn(lf.tensor(x))), rtol=1e-5, atol=1e-6)
    assert sum("dynamic=True" in str(m.message) for m in w) == 1
    assert f.cache_info().compiles == 2
