"""Basic layers against torch (the oracle): one table of (lazyflow ctor, torch ctor, inputs) drives state_dict
key/shape equality, forward and gradient parity with torch's weights copied in (eager and compiled), state_dict
round trips in both directions, deepcopy and train/eval; then default-init statistics, dropout and bad input."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

import lazyflow as lf
import lazyflow.nn as nn
import lazyflow.nn.functional as F

RTOL, ATOL = 1e-5, 1e-6


def _f(*shape):
    return ("f", shape)


def _i(high, *shape):
    return ("i", shape, high)


# (id, lazyflow constructor, torch constructor, input specs); both constructors get the same arguments
LAYERS = [
    ("linear", lambda m: m.Linear(4, 3), [_f(2, 5, 4)]),
    ("linear_nobias", lambda m: m.Linear(4, 3, bias=False), [_f(6, 4)]),
    ("linear_1d", lambda m: m.Linear(4, 2), [_f(4)]),
    ("bilinear", lambda m: m.Bilinear(3, 4, 5), [_f(6, 3), _f(6, 4)]),
    ("bilinear_nobias", lambda m: m.Bilinear(2, 3, 2, bias=False), [_f(2, 4, 2), _f(2, 4, 3)]),
    ("identity", lambda m: m.Identity(7, unused=1), [_f(3, 4)]),
    ("flatten", lambda m: m.Flatten(), [_f(2, 3, 4)]),
    ("flatten_01", lambda m: m.Flatten(0, 1), [_f(2, 3, 4)]),
    ("unflatten", lambda m: m.Unflatten(1, (2, 3)), [_f(4, 6)]),
    ("embedding", lambda m: m.Embedding(10, 4), [_i(10, 3, 5)]),
    ("embedding_pad", lambda m: m.Embedding(10, 4, padding_idx=2), [_i(4, 3, 6)]),
    ("embedding_pad_neg", lambda m: m.Embedding(6, 3, padding_idx=-1), [_i(6, 8)]),
    ("embedding_freq", lambda m: m.Embedding(5, 3, scale_grad_by_freq=True), [_i(5, 4, 4)]),
    ("relu", lambda m: m.ReLU(), [_f(3, 4)]),
    ("relu6", lambda m: m.ReLU6(), [_f(3, 4)]),
    ("leaky_relu", lambda m: m.LeakyReLU(0.2), [_f(3, 4)]),
    ("elu", lambda m: m.ELU(0.7), [_f(3, 4)]),
    ("selu", lambda m: m.SELU(), [_f(3, 4)]),
    ("celu", lambda m: m.CELU(0.5), [_f(3, 4)]),
    ("gelu", lambda m: m.GELU(), [_f(3, 4)]),
    ("gelu_tanh", lambda m: m.GELU(approximate="tanh"), [_f(3, 4)]),
    ("silu", lambda m: m.SiLU(), [_f(3, 4)]),
    ("mish", lambda m: m.Mish(), [_f(3, 4)]),
    ("tanh", lambda m: m.Tanh(), [_f(3, 4)]),
    ("sigmoid", lambda m: m.Sigmoid(), [_f(3, 4)]),
    ("hardtanh", lambda m: m.Hardtanh(-0.5, 0.7), [_f(3, 4)]),
    ("hardsigmoid", lambda m: m.Hardsigmoid(), [_f(3, 4)]),
    ("hardswish", lambda m: m.Hardswish(), [_f(3, 4)]),
    ("softplus", lambda m: m.Softplus(beta=2.0, threshold=1.0), [_f(3, 4)]),
    ("softsign", lambda m: m.Softsign(), [_f(3, 4)]),
    ("logsigmoid", lambda m: m.LogSigmoid(), [_f(3, 4)]),
    ("tanhshrink", lambda m: m.Tanhshrink(), [_f(3, 4)]),
    ("threshold", lambda m: m.Threshold(0.1, 20.0), [_f(3, 4)]),
    ("glu", lambda m: m.GLU(1), [_f(3, 4)]),
    ("softmax", lambda m: m.Softmax(dim=1), [_f(2, 5, 3)]),
    ("log_softmax", lambda m: m.LogSoftmax(dim=-1), [_f(2, 5)]),
    ("softmin", lambda m: m.Softmin(dim=0), [_f(4, 3)]),
    ("dropout_eval", lambda m: m.Dropout(0.3), [_f(3, 4)]),
    ("sequential", lambda m: m.Sequential(m.Linear(4, 8), m.ReLU(), m.Dropout(0.5), m.Linear(8, 2)), [_f(3, 4)]),
    (
        "nested",
        lambda m: m.Sequential(m.Sequential(m.Linear(3, 3), m.Tanh()), m.ModuleList([m.Linear(3, 3)])[0], m.GELU()),
        [_f(2, 3)],
    ),
]
IDS = [r[0] for r in LAYERS]


def _inputs(specs, seed):
    rng = np.random.default_rng(seed)
    out = []
    for s in specs:
        if s[0] == "f":
            out.append(rng.standard_normal(s[1]).astype(np.float32))
        else:
            out.append(rng.integers(0, s[2], s[1]).astype(np.int64))
    return out


def _pair(ctor):
    lf.manual_seed(0)
    torch.manual_seed(0)
    lm, tm = ctor(nn), ctor(torch.nn)
    lm.eval()
    tm.eval()
    return lm, tm


def _load_torch_weights(lm, tm):
    return lm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})


def _torch_run(tm, arrays):
    ts = [torch.tensor(a, requires_grad=a.dtype == np.float32) for a in arrays]
    out = tm(*ts)
    return ts, out


@pytest.mark.parametrize("name,ctor,specs", LAYERS, ids=IDS)
def test_state_dict_keys_and_shapes_match_torch(name, ctor, specs):
    lm, tm = _pair(ctor)
    assert [(k, tuple(v.shape)) for k, v in lm.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in tm.state_dict().items()
    ]
    assert [n for n, _ in lm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert [n for n, _ in lm.named_modules()] == [n for n, _ in tm.named_modules()]
    assert repr(lm) == repr(tm)


@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.parametrize("name,ctor,specs", LAYERS, ids=IDS)
def test_forward_and_gradients_match_torch(name, ctor, specs, mode):
    lm, tm = _pair(ctor)
    result = _load_torch_weights(lm, tm)
    assert result.missing_keys == [] and result.unexpected_keys == []
    arrays = _inputs(specs, seed=len(name))
    ts, tout = _torch_run(tm, arrays)
    cot = np.random.default_rng(1).standard_normal(tuple(tout.shape)).astype(np.float32)
    tout.backward(torch.tensor(cot))

    xs = [lf.tensor(a, requires_grad=a.dtype == np.float32) for a in arrays]
    run = lf.compile(lm) if mode == "graph" else lm
    out = run(*xs)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=RTOL, atol=ATOL)
    out.backward(lf.tensor(cot))
    for x, t in zip(xs, ts):
        if t.requires_grad:
            np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=RTOL, atol=ATOL)
    tgrads = {n: p.grad for n, p in tm.named_parameters()}
    for n, p in lm.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tgrads[n].numpy(), rtol=RTOL, atol=ATOL, err_msg=n)


@pytest.mark.parametrize(
    "name,ctor,specs",
    [r for r in LAYERS if r[0] in ("linear", "bilinear", "embedding_pad", "sequential", "nested")],
    ids=["linear", "bilinear", "embedding_pad", "sequential", "nested"],
)
def test_state_dict_round_trips_and_deepcopy(name, ctor, specs):
    lm, tm = _pair(ctor)
    arrays = _inputs(specs, seed=3)
    xs = [lf.tensor(a) for a in arrays]
    ref = lm(*xs).detach().numpy()

    # lazyflow -> torch: torch computes the same outputs with lazyflow's weights
    tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in lm.state_dict().items()})
    np.testing.assert_allclose(tm(*[torch.tensor(a) for a in arrays]).detach().numpy(), ref, rtol=RTOL, atol=ATOL)

    # lazyflow -> fresh lazyflow (different seed): same outputs, objects kept
    lf.manual_seed(123)
    other = ctor(nn).eval()
    params_before = [id(p) for p in other.parameters()]
    other.load_state_dict(lm.state_dict())
    assert [id(p) for p in other.parameters()] == params_before
    np.testing.assert_allclose(other(*xs).detach().numpy(), ref, rtol=0, atol=0)

    # deepcopy: equal outputs, independent parameters
    clone = copy.deepcopy(lm)
    np.testing.assert_allclose(clone(*xs).detach().numpy(), ref, rtol=0, atol=0)
    for (n, p), (n2, p2) in zip(lm.named_parameters(), clone.named_parameters()):
        assert n == n2 and p is not p2 and type(p2) is nn.Parameter
    with lf.no_grad():
        for p in clone.parameters():
            p.add_(1.0)
    np.testing.assert_allclose(lm(*xs).detach().numpy(), ref, rtol=0, atol=0)


def test_train_eval_flags_follow_torch():
    lm, tm = _pair(lambda m: m.Sequential(m.Linear(2, 2), m.Sequential(m.Dropout(), m.ReLU())))
    for mode in (True, False, True):
        lm.train(mode)
        tm.train(mode)
        assert [m.training for m in lm.modules()] == [m.training for m in tm.modules()] == [mode] * 5
    assert lm.eval() is lm and not lm[1][0].training
    with pytest.raises(ValueError, match="boolean"):
        lm.train("yes")


# ---------------------------------------------------------------- default initialisation
def _check_uniform(values: np.ndarray, bound: float):
    assert np.abs(values).max() <= bound + 1e-7
    # U(-b, b): mean 0, variance b^2/3; tolerances are ~5 standard errors for these sample sizes
    n = values.size
    assert abs(values.mean()) < 5 * bound / math.sqrt(3 * n)
    assert abs(values.var() / (bound**2 / 3) - 1) < 5 * math.sqrt(0.8 / n)


def test_linear_and_bilinear_default_init_follow_torch_bounds():
    lin = nn.Linear(64, 256)
    _check_uniform(lin.weight.detach().numpy(), 1 / math.sqrt(64))  # kaiming_uniform(a=sqrt(5)) == U(+-1/sqrt(fan_in))
    _check_uniform(lin.bias.detach().numpy(), 1 / math.sqrt(64))
    bil = nn.Bilinear(16, 8, 64)
    _check_uniform(bil.weight.detach().numpy(), 1 / math.sqrt(16))
    assert lin.weight.requires_grad and lin.weight.dtype is lf.float32
    assert nn.Linear(2, 3, dtype=lf.float64).weight.dtype is lf.float64


def test_embedding_default_init_is_standard_normal_with_zero_padding_row():
    emb = nn.Embedding(400, 50, padding_idx=3)
    w = emb.weight.detach().numpy()
    assert np.all(w[3] == 0)
    rest = np.delete(w, 3, axis=0)
    assert abs(rest.mean()) < 5 / math.sqrt(rest.size)
    assert abs(rest.std() - 1) < 0.02


def test_seeded_construction_is_reproducible():
    lf.manual_seed(7)
    a = nn.Linear(5, 5).weight.detach().numpy()
    lf.manual_seed(7)
    b = nn.Linear(5, 5).weight.detach().numpy()
    c = nn.Linear(5, 5).weight.detach().numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(b, c)


# ---------------------------------------------------------------- dropout
def test_dropout_training_statistics_and_reproducibility():
    x = lf.ones(200, 100)
    d = nn.Dropout(0.3)
    lf.manual_seed(0)
    y = d(x).numpy()
    kept = y != 0
    assert abs(kept.mean() - 0.7) < 0.02
    np.testing.assert_allclose(y[kept], 1 / 0.7, rtol=1e-6)
    lf.manual_seed(0)
    np.testing.assert_array_equal(d(x).numpy(), y)
    assert not np.array_equal(d(x).numpy(), y)  # the generator advanced
    d.eval()
    assert d(x) is x
    assert nn.Dropout(0.0)(x) is x
    np.testing.assert_array_equal(nn.Dropout(1.0)(x).numpy(), np.zeros((200, 100)))


def test_dropout_gradient_uses_the_same_mask():
    x = lf.ones(50, 40, requires_grad=True)
    lf.manual_seed(1)
    y = F.dropout(x, 0.5)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), y.detach().numpy())


def test_dropout2d_zeroes_whole_channels():
    lf.manual_seed(0)
    y = nn.Dropout2d(0.5)(lf.ones(8, 16, 3, 3)).numpy()
    per_channel = y.reshape(8, 16, 9)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2).all(-1))
    assert 0.3 < (per_channel[..., 0] == 0).mean() < 0.7


def test_dropout_rejects_bad_probability():
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout(lf.ones(2), -0.1)


# ---------------------------------------------------------------- bad input and misc behaviour
def test_wrong_input_shape_names_layer_expected_and_received():
    with pytest.raises(lf.ShapeError, match=r"Linear\(in_features=4.*\(\*, 4\).*\[2, 5\]"):
        nn.Linear(4, 3)(lf.ones(2, 5))
    with pytest.raises(lf.ShapeError, match=r"Bilinear.*\(\*, 3\) and \(\*, 4\).*\[2, 3\] and \[2, 5\]"):
        nn.Bilinear(3, 4, 2)(lf.ones(2, 3), lf.ones(2, 5))
    with pytest.raises(lf.ShapeError, match=r"linear.*\(\*, 4\)"):
        F.linear(lf.ones(3), lf.ones(2, 4))
    with pytest.raises(lf.ShapeError, match=r"Unflatten\(dim=1, unflattened_size=\(2, 4\)\).*\[3, 6\]"):
        nn.Unflatten(1, (2, 4))(lf.ones(3, 6))
    with pytest.raises(lf.IndexOutOfRangeError, match=r"Flatten\(start_dim=2.*\[3\]"):
        nn.Flatten(2)(lf.ones(3))


def test_embedding_rejects_bad_indices():
    emb = nn.Embedding(4, 2)
    with pytest.raises(lf.IndexOutOfRangeError, match="index 4 is out of range"):
        emb(lf.tensor([0, 4]))
    with pytest.raises(lf.DTypeError, match="integer"):
        emb(lf.tensor([0.0, 1.0]))
    with pytest.raises(lf.IndexOutOfRangeError, match="padding_idx"):
        nn.Embedding(4, 2, padding_idx=4)


def test_embedding_max_norm_renormalises_looked_up_rows_like_torch():
    tm = torch.nn.Embedding(6, 3, max_norm=1.0)
    lm = nn.Embedding(6, 3, max_norm=1.0)
    with torch.no_grad():
        tm.weight.mul_(3)
    _load_torch_weights(lm, tm)
    idx = np.array([[0, 2], [2, 5]])
    out = lm(lf.tensor(idx))
    tout = tm(torch.tensor(idx))
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(lm.weight.detach().numpy(), tm.weight.detach().numpy(), rtol=1e-5)


def test_embedding_from_pretrained_is_frozen():
    w = lf.randn(3, 2)
    emb = nn.Embedding.from_pretrained(w)
    assert not emb.weight.requires_grad
    np.testing.assert_array_equal(emb(lf.tensor([2])).numpy()[0], w.numpy()[2])


def test_inplace_activation_overwrites_input():
    x = lf.tensor([-1.0, 2.0])
    y = nn.ReLU(inplace=True)(x)
    assert y is x
    np.testing.assert_array_equal(x.numpy(), [0.0, 2.0])
    z = lf.tensor([-1.0, 2.0])
    F.leaky_relu(z, 0.5, inplace=True)
    np.testing.assert_array_equal(z.numpy(), [-0.5, 2.0])


def test_functional_one_hot_and_pad_match_torch():
    idx = np.array([[0, 3], [2, 1]])
    np.testing.assert_array_equal(
        F.one_hot(lf.tensor(idx), 5).numpy(), torch.nn.functional.one_hot(torch.tensor(idx), 5).numpy()
    )
    x = np.arange(12, dtype=np.float32).reshape(1, 3, 4)
    for mode in ("constant", "reflect", "replicate", "circular"):
        np.testing.assert_array_equal(
            F.pad(lf.tensor(x), (1, 2), mode=mode).numpy(),
            torch.nn.functional.pad(torch.tensor(x), (1, 2), mode=mode).numpy(),
        )


def test_normalize_matches_torch():
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    for p, dim in ((2.0, 1), (1.0, 0)):
        np.testing.assert_allclose(
            F.normalize(lf.tensor(x), p=p, dim=dim).numpy(),
            torch.nn.functional.normalize(torch.tensor(x), p=p, dim=dim).numpy(),
            rtol=1e-6,
        )


def test_compiled_dropout_draws_fresh_masks_and_follows_eval():
    d = nn.Dropout(0.5)
    cd = lf.compile(d)
    x = lf.ones(2000)
    y1, y2 = cd(x).numpy(), cd(x).numpy()
    assert set(np.unique(y1)) == {0.0, 2.0}
    assert abs((y1 == 0).mean() - 0.5) < 0.05 and (y1 != y2).mean() > 0.3
    d.eval()
    np.testing.assert_array_equal(cd(x).numpy(), np.ones(2000))
