"""lf.onnx.export: the written file runs in onnxruntime and matches numpy (MLP, single ops) and torch (a CNN with
BatchNorm in eval mode + MaxPool + ReLU, a Transformer encoder) on the same weights."""

from __future__ import annotations

import inspect
import io
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import lazyflow as lf
from lazyflow._core.errors import ArgumentError

ATOL = 1e-5
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _env():
    return dict(os.environ, PYTHONPATH=REPO, JAX_PLATFORMS="cpu")


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _np(t):
    return np.array(t.detach().numpy())


def _run(path, **feeds):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _torch_like(lf_model, t_model):
    t_model.load_state_dict({k: torch.tensor(_np(v)) for k, v in lf_model.state_dict().items()})
    return t_model.eval()


class MLP(lf.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = lf.nn.Linear(4, 16)
        self.fc2 = lf.nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(lf.tanh(self.fc1(x))).softmax(-1)


def _mlp_ref(m, x):
    h = np.tanh(x @ _np(m.fc1.weight).T + _np(m.fc1.bias)) @ _np(m.fc2.weight).T + _np(m.fc2.bias)
    e = np.exp(h - h.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_mlp_with_a_dynamic_batch_axis(tmp_path):
    m = MLP()
    path = tmp_path / "mlp.onnx"
    lf.onnx.export(
        m,
        (lf.tensor(_x(2, 4)),),
        str(path),
        input_names=["x"],
        output_names=["probs"],
        dynamic_axes={"x": {0: "batch"}, "probs": {0: "batch"}},
    )
    proto = onnx.load(str(path))
    assert [d.dim_param or d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim] == ["batch", 4]
    assert [d.dim_param or d.dim_value for d in proto.graph.output[0].type.tensor_type.shape.dim] == ["batch", 3]
    assert {i.name for i in proto.graph.initializer} >= {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    for n in (1, 2, 9):
        x = _x(n, 4, seed=n)
        (y,) = _run(path, x=x)
        np.testing.assert_allclose(y, _mlp_ref(m, x), atol=ATOL)


def test_static_export_rejects_another_batch_in_onnxruntime(tmp_path):
    path = tmp_path / "s.onnx"
    lf.onnx.export(MLP(), (lf.ones(2, 4),), str(path))
    with pytest.raises(Exception, match="(?i)dimension|shape"):
        _run(path, input0=_x(3, 4))


def test_dynamic_axes_as_a_list_and_a_reshape_that_depends_on_it(tmp_path):
    def f(x):
        return (x.reshape(x.shape[0], -1) * 2).sum(1, keepdim=True), x.view(-1, 12).mean(0)

    path = tmp_path / "r.onnx"
    lf.onnx.export(f, (lf.ones(2, 3, 4),), str(path), input_names=["x"], dynamic_axes={"x": [0]})
    x = _x(5, 3, 4)
    a, b = _run(path, x=x)
    np.testing.assert_allclose(a, (x.reshape(5, -1) * 2).sum(1, keepdims=True), atol=ATOL)
    np.testing.assert_allclose(b, x.reshape(5, 12).mean(0), atol=ATOL)


def _cnn():
    nn = lf.nn
    m = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),  # 100 output positions: XLA's convolution (conv_general_dilated)
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 4, 3, stride=2),  # 4 positions: lazyflow's im2col (slices, stack, einsum)
        nn.AvgPool2d(2),
        nn.Flatten(),
        nn.Linear(4, 5),
    )
    m.train()
    with lf.no_grad():
        for _ in range(3):
            m(lf.randn(4, 3, 10, 10) * 2 + 0.5)  # running statistics away from (0, 1)
    t = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 4, 3, stride=2),
        torch.nn.AvgPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(4, 5),
    )
    return m, _torch_like(m, t)


def test_cnn_with_batchnorm_maxpool_relu_matches_torch(tmp_path):
    m, t = _cnn()
    path = tmp_path / "cnn.onnx"
    lf.onnx.export(m, (lf.ones(2, 3, 10, 10),), str(path), input_names=["x"], dynamic_axes={"x": {0: "n"}})
    assert m.training  # restored after the eval-mode export
    for n in (2, 5):
        x = _x(n, 3, 10, 10)
        want = t(torch.tensor(x)).detach().numpy()
        np.testing.assert_allclose(_run(path, x=x)[0], want, atol=ATOL)
    m.eval()
    np.testing.assert_allclose(_np(m(lf.tensor(x))), want, atol=ATOL)


def test_transformer_encoder_matches_torch(tmp_path):
    layer = lf.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True)
    m = lf.nn.TransformerEncoder(layer, 2)
    tl = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True)
    t = _torch_like(m, torch.nn.TransformerEncoder(tl, 2, enable_nested_tensor=False))
    path = tmp_path / "enc.onnx"
    lf.onnx.export(
        m,
        (lf.ones(2, 5, 16),),
        str(path),
        input_names=["src"],
        output_names=["out"],
        dynamic_axes={"src": {0: "batch", 1: "seq"}, "out": {0: "batch", 1: "seq"}},
    )
    for shape in ((2, 5, 16), (3, 7, 16)):  # batch and sequence length both dynamic
        x = _x(*shape)
        with torch.no_grad():
            want = t(torch.tensor(x)).numpy()
        np.testing.assert_allclose(_run(path, src=x)[0], want, atol=ATOL)


OPS = {  # name: (function of one tensor, numpy reference, input)
    "exp_log_sqrt": (lambda x: (x.abs() + 1).log() + x.exp() + (x.abs() + 1).sqrt(), None, None),
    "sigmoid_rsqrt": (lambda x: lf.sigmoid(x) * (x * x + 1).rsqrt(), None, None),
    "clamp_where": (lambda x: lf.where(x > 0, x.clamp(max=0.5), -x), None, None),
    "pow_neg": (lambda x: (-x) ** 3 + x.pow(2), None, None),
    "reductions": (lambda x: x.amax(1) + x.amin(1) + x.mean(1) + x.sum(1), None, None),
    "argmax": (lambda x: x.argmax(1), None, None),
    "cat_chunk": (lambda x: lf.cat(list(reversed(x.chunk(2, dim=1))), 1), None, None),
    "slice_permute": (lambda x: x[:, 1:3].permute(1, 0).unsqueeze(0), None, None),
    "log_softmax_gelu": (lambda x: lf.nn.functional.log_softmax(x, 1) + lf.nn.functional.gelu(x), None, None),
    "pad_cast": (lambda x: lf.nn.functional.pad(x, (1, 2)).to(lf.float64), None, None),
    "erf_tanh": (lambda x: lf.erf(x) * lf.tanh(x), None, None),
    "layer_norm": (lambda x: lf.nn.functional.layer_norm(x, (4,)), None, None),
    "max_pool1d": (lambda x: lf.nn.functional.max_pool1d(x.unsqueeze(0), 2), None, None),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_single_ops_match_torch(tmp_path, name):
    fn = OPS[name][0]
    x = _x(3, 4, seed=7)
    path = tmp_path / f"{name}.onnx"
    lf.onnx.export(fn, (lf.tensor(x),), str(path))
    import torch as T

    # the same expression over torch tensors: lazyflow's API is torch's
    tfn = {
        "exp_log_sqrt": lambda x: (x.abs() + 1).log() + x.exp() + (x.abs() + 1).sqrt(),
        "sigmoid_rsqrt": lambda x: T.sigmoid(x) * (x * x + 1).rsqrt(),
        "clamp_where": lambda x: T.where(x > 0, x.clamp(max=0.5), -x),
        "pow_neg": lambda x: (-x) ** 3 + x.pow(2),
        "reductions": lambda x: x.amax(1) + x.amin(1) + x.mean(1) + x.sum(1),
        "argmax": lambda x: x.argmax(1),
        "cat_chunk": lambda x: T.cat(list(reversed(x.chunk(2, dim=1))), 1),
        "slice_permute": lambda x: x[:, 1:3].permute(1, 0).unsqueeze(0),
        "log_softmax_gelu": lambda x: T.nn.functional.log_softmax(x, 1) + T.nn.functional.gelu(x),
        "pad_cast": lambda x: T.nn.functional.pad(x, (1, 2)).to(T.float64),
        "erf_tanh": lambda x: T.erf(x) * T.tanh(x),
        "layer_norm": lambda x: T.nn.functional.layer_norm(x, (4,)),
        "max_pool1d": lambda x: T.nn.functional.max_pool1d(x.unsqueeze(0), 2),
    }[name]
    want = tfn(T.tensor(x)).numpy()
    (got,) = _run(path, input0=x)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, atol=ATOL)


class Cumulative(lf.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = lf.nn.Linear(3, 3)

    def forward(self, x):
        h = self.fc(x)
        return h.cumsum(0)  # no ONNX lowering: the error names this line


def test_an_op_without_a_lowering_names_the_op_and_the_models_line(tmp_path):
    src, start = inspect.getsourcelines(Cumulative.forward)
    line = start + next(i for i, s in enumerate(src) if "cumsum" in s)
    with pytest.raises(lf.onnx.ExportError, match=rf"'cumsum'.*test_onnx\.py:{line}\b") as e:
        lf.onnx.export(Cumulative(), (lf.ones(2, 3),), str(tmp_path / "c.onnx"))
    assert "lf.export.export" in str(e.value)  # the way out: StableHLO has every op
    assert not (tmp_path / "c.onnx").exists()


def test_signature_follows_torch_onnx_export():
    ours = inspect.signature(lf.onnx.export).parameters
    theirs = inspect.signature(torch.onnx.export).parameters
    assert list(ours)[:3] == list(theirs)[:3] == ["model", "args", "f"]
    for name, p in ours.items():
        assert name in theirs and theirs[name].kind == p.kind, name
        assert p.default == theirs[name].default or name in ("verbose",), name


def test_import_lazyflow_needs_no_onnx_and_lf_onnx_says_how_to_get_it():
    code = (
        "import sys; sys.modules['onnx'] = None\n"
        "import lazyflow as lf\n"
        "try:\n    lf.onnx\nexcept ImportError as e:\n    print(e)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=_env())
    assert r.returncode == 0, r.stderr
    assert "pip install 'lazyflow[onnx]'" in r.stdout


def test_bad_arguments(tmp_path):
    m, x, f = MLP(), lf.ones(2, 4), str(tmp_path / "m.onnx")
    with pytest.raises(ArgumentError, match="opset_version"):
        lf.onnx.export(m, (x,), f, opset_version=11)
    with pytest.raises(ArgumentError, match="input_names"):
        lf.onnx.export(m, (x,), f, input_names=["a", "b"])
    with pytest.raises(ArgumentError, match=r"\['y'\]"):
        lf.onnx.export(m, (x,), f, input_names=["x"], dynamic_axes={"y": [0]})
    with pytest.raises(ArgumentError, match="export_params"):
        lf.onnx.export(m, (x,), f, export_params=False)
    with pytest.raises(ArgumentError, match="tuple of tensors"):
        lf.onnx.export(m, "x", f)
    with pytest.raises(ArgumentError, match="keyword"):
        lf.onnx.export(m, (x,), f, kwargs={"x": x})


def test_file_objects_and_no_file(tmp_path):
    m = MLP()
    x = _x(2, 4)
    buf = io.BytesIO()
    lf.onnx.export(m, (lf.tensor(x),), buf, opset_version=20)
    proto = lf.onnx.export(m, (lf.tensor(x),))
    assert isinstance(proto, onnx.ModelProto) and proto.opset_import[0].version == 18
    for model_bytes in (buf.getvalue(), proto.SerializeToString()):
        sess = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(sess.run(None, {"input0": x})[0], _mlp_ref(m, x), atol=ATOL)


def _not_onnx_cases():
    """The README's list of what cannot be exported to ONNX: (model, torch twin, inputs, the primitive named)."""
    convt = lf.nn.ConvTranspose2d(2, 3, 3)
    lstm = lf.nn.LSTM(3, 4, batch_first=True)
    return {
        "cumsum": (lambda x: x.cumsum(0), lambda x: x.cumsum(0), (_x(3, 4),), "cumsum"),
        "torch_gather": (
            lambda x: lf.gather(x, 1, lf.tensor(np.array([[0, 1], [3, 0], [2, 2]]))),
            lambda x: torch.gather(x, 1, torch.tensor([[0, 1], [3, 0], [2, 2]])),
            (_x(3, 4),),
            "gather",
        ),
        "sort": (lambda x: x.sort(1)[0], lambda x: x.sort(1)[0], (_x(3, 4),), "sort"),
        "topk": (lambda x: x.topk(2, 1)[0], lambda x: x.topk(2, 1)[0], (_x(3, 4),), "top_k"),
        "conv_transpose": (convt, _torch_like(convt, torch.nn.ConvTranspose2d(2, 3, 3)), (_x(1, 2, 5, 5),), "rev"),
        "lstm": (
            lambda x: lstm(x)[0],
            lambda x, t=_torch_like(lstm, torch.nn.LSTM(3, 4, batch_first=True)): t(x)[0],
            (_x(2, 5, 3),),
            "scan",
        ),
    }


@pytest.mark.parametrize("name", ["cumsum", "torch_gather", "sort", "topk", "conv_transpose", "lstm"])
def test_what_onnx_cannot_export_raises_and_lf_export_runs(tmp_path, name):
    model, twin, args, prim = _not_onnx_cases()[name]
    with pytest.raises(lf.onnx.ExportError, match=rf"the op '{prim}' \(from "):
        lf.onnx.export(model, tuple(lf.tensor(a) for a in args), str(tmp_path / "m.onnx"))
    ep = lf.export.export(model, tuple(lf.tensor(a) for a in args))
    with torch.no_grad():
        want = twin(*(torch.tensor(a) for a in args)).numpy()
    np.testing.assert_allclose(ep(*(lf.tensor(a) for a in args)).numpy(), want, atol=ATOL)


GATHERS = {  # indexing that lowers to lax.gather: (lazyflow fn, torch fn)
    "rows": (lambda x: x[lf.tensor(np.array([2, 0, 2]))], lambda x: x[torch.tensor([2, 0, 2])]),
    "negative": (lambda x: x[lf.tensor(np.array([-1, 0]))], lambda x: x[torch.tensor([-1, 0])]),
    "columns_2d": (
        lambda x: x[:, lf.tensor(np.array([[3, 1], [0, 0]]))],
        lambda x: x[:, torch.tensor([[3, 1], [0, 0]])],
    ),
    "two_axes": (
        lambda x: x[lf.tensor(np.array([0, 2])), lf.tensor(np.array([1, 3]))],
        lambda x: x[torch.tensor([0, 2]), torch.tensor([1, 3])],
    ),
}


@pytest.mark.parametrize("name", sorted(GATHERS))
def test_integer_tensor_indexing_matches_torch(tmp_path, name):
    fn, tfn = GATHERS[name]
    x = _x(3, 4, seed=2)
    path = tmp_path / "g.onnx"
    lf.onnx.export(fn, (lf.tensor(x),), str(path))
    np.testing.assert_allclose(_run(path, input0=x)[0], tfn(torch.tensor(x)).numpy(), atol=ATOL)


def test_embedding_with_a_dynamic_batch_matches_torch(tmp_path):
    m = lf.nn.Embedding(10, 3)
    t = _torch_like(m, torch.nn.Embedding(10, 3))
    path = tmp_path / "e.onnx"
    lf.onnx.export(m, (lf.tensor(np.array([[1, 2]])),), str(path), input_names=["ids"], dynamic_axes={"ids": [0, 1]})
    ids = np.array([[9, 0, 3], [4, 4, 1]])
    with torch.no_grad():
        want = t(torch.tensor(ids)).numpy()
    np.testing.assert_allclose(_run(path, ids=ids)[0], want, atol=ATOL)
