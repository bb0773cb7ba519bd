"""lf.export: a module as a StableHLO program plus weights, run in this process and in a fresh one that never sees
the model's class; references are numpy (the MLP's formula) and torch (BatchNorm/conv modules in eval mode)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import lazyflow as lf
from lazyflow._core.errors import ArgumentError, CheckpointError, DTypeError, GraphError, ShapeError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class TinyNet(lf.nn.Module):
    """Defined only here: the loaded program must run without it."""

    def __init__(self):
        super().__init__()
        self.fc1 = lf.nn.Linear(4, 8)
        self.fc2 = lf.nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(lf.relu(self.fc1(x)))


def _np(t):
    return np.array(t.detach().numpy())


def _ref(model: TinyNet, x: np.ndarray) -> np.ndarray:
    w1, b1, w2, b2 = (_np(p) for p in (model.fc1.weight, model.fc1.bias, model.fc2.weight, model.fc2.bias))
    return np.maximum(x @ w1.T + b1, 0) @ w2.T + b2


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_mlp_matches_numpy_and_runs_a_new_batch_size_with_a_dynamic_dim():
    m = TinyNet()
    ep = lf.export.export(m, (lf.tensor(_x(2, 4)),), dynamic_shapes={"x": {0: lf.export.Dim("batch")}})
    for n in (1, 2, 7):
        x = _x(n, 4, seed=n)
        np.testing.assert_allclose(ep(lf.tensor(x)).numpy(), _ref(m, x), rtol=1e-5, atol=1e-6)
    x = _x(4, 4, seed=9)
    np.testing.assert_allclose(ep(x).numpy(), _ref(m, x), rtol=1e-5, atol=1e-6)  # numpy in: copied by lf.tensor
    assert ep.input_specs == [(("batch", "4"), "float32")]
    assert ep.module() is ep and "batch" in repr(ep)
    assert "stablehlo" in ep.exported.mlir_module()
    assert set(ep.exported.platforms) == {"cpu", "cuda"}


def test_static_export_rejects_another_shape_naming_expected_and_arrived():
    ep = lf.export.export(TinyNet(), (lf.tensor(_x(2, 4)),))
    with pytest.raises(ShapeError, match=r"expected shape \(2, 4\), got \(3, 4\)"):
        ep(lf.tensor(_x(3, 4)))
    with pytest.raises(ShapeError, match=r"expected shape \(2, 4\), got \(2, 4, 1\)"):
        ep(lf.tensor(_x(2, 4, 1)))
    with pytest.raises(DTypeError, match="expected dtype lazyflow.float32, got lazyflow.float64"):
        ep(lf.zeros(2, 4, dtype=lf.float64))
    with pytest.raises(ArgumentError, match="takes 1 input"):
        ep(lf.zeros(2, 4), lf.zeros(2, 4))


def test_dynamic_dim_keeps_the_static_axes_and_its_bounds():
    b = lf.export.Dim("b", min=2, max=6)
    ep = lf.export.export(TinyNet(), (lf.tensor(_x(3, 4)),), dynamic_shapes=({0: b},))
    with pytest.raises(ShapeError, match=r"expected shape \(b, 4\), got \(3, 5\)"):
        ep(lf.tensor(_x(3, 5)))
    with pytest.raises(ShapeError):
        ep(lf.tensor(_x(1, 4)))  # below min
    with pytest.raises(ShapeError):
        ep(lf.tensor(_x(7, 4)))  # above max


def test_python_control_flow_on_a_dynamic_dim_raises_export_error():
    def f(x):
        return x * 2 if x.shape[0] > 3 else x

    with pytest.raises(lf.export.ExportError, match="dynamic dimension"):
        lf.export.export(f, (lf.ones(5),), dynamic_shapes=({0: lf.export.Dim("n")},))
    with pytest.raises(lf.onnx.ExportError, match="dynamic axis"):
        lf.onnx.export(f, (lf.ones(5),), None, input_names=["x"], dynamic_axes={"x": [0]})


def test_two_inputs_sharing_a_dim_must_agree():
    def f(x, y):
        return x * y + 1

    d = lf.export.Dim("n")
    ep = lf.export.export(f, (lf.ones(3), lf.ones(3)), dynamic_shapes={"x": {0: d}, "y": {0: d}})
    a, c = _x(5), _x(5, seed=1)
    np.testing.assert_allclose(ep(lf.tensor(a), lf.tensor(c)).numpy(), a * c + 1, rtol=1e-6)
    with pytest.raises(ShapeError):
        ep(lf.tensor(_x(5)), lf.tensor(_x(4)))


def test_function_with_structured_outputs():
    def f(x, y):
        return {"sum": (x + y).sum(), "pair": (x * 2, y.exp())}

    x, y = _x(2, 3), _x(2, 3, seed=1)
    out = lf.export.export(f, (lf.tensor(x), lf.tensor(y)))(lf.tensor(x), lf.tensor(y))
    np.testing.assert_allclose(out["sum"].numpy(), (x + y).sum(), rtol=1e-5)
    np.testing.assert_allclose(out["pair"][0].numpy(), x * 2)
    np.testing.assert_allclose(out["pair"][1].numpy(), np.exp(y), rtol=1e-6)


def _bn_cnn():
    m = lf.nn.Sequential(
        lf.nn.Conv2d(2, 4, 3, padding=1), lf.nn.BatchNorm2d(4), lf.nn.ReLU(), lf.nn.MaxPool2d(2), lf.nn.Flatten()
    )
    m.train()
    m(lf.randn(6, 2, 6, 6) * 3 + 1)  # running statistics move away from (0, 1)
    t = torch.nn.Sequential(
        torch.nn.Conv2d(2, 4, 3, padding=1),
        torch.nn.BatchNorm2d(4),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
    )
    t.load_state_dict({k: torch.tensor(_np(v)) for k, v in m.state_dict().items()})
    return m, t.eval()


def test_modules_are_exported_in_eval_mode_and_their_flags_restored():
    m, t = _bn_cnn()
    m.train()
    x = _x(3, 2, 6, 6)
    ep = lf.export.export(m, (lf.tensor(x),))
    assert m.training and all(c.training for c in m.modules())
    np.testing.assert_allclose(ep(lf.tensor(x)).numpy(), t(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_transformer_encoder_with_dynamic_batch_and_sequence_matches_torch():
    m = lf.nn.TransformerEncoder(lf.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True), 2)
    t = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True), 2, enable_nested_tensor=False
    )
    t.load_state_dict({k: torch.tensor(_np(v)) for k, v in m.state_dict().items()})
    t.eval()
    dims = {0: lf.export.Dim("batch"), 1: lf.export.Dim("seq")}
    ep = lf.export.export(m, (lf.ones(2, 5, 16),), dynamic_shapes=(dims,))
    for shape in ((2, 5, 16), (3, 9, 16)):
        x = _x(*shape)
        with torch.no_grad():
            want = t(torch.tensor(x)).numpy()
        np.testing.assert_allclose(ep(lf.tensor(x)).numpy(), want, rtol=1e-5, atol=1e-5)


def test_weights_are_a_snapshot_taken_at_export():
    m = TinyNet()
    x = _x(2, 4)
    want = _ref(m, x)
    ep = lf.export.export(m, (lf.tensor(x),))
    with lf.no_grad():
        m.fc2.bias.add_(100.0)
    np.testing.assert_allclose(ep(lf.tensor(x)).numpy(), want, rtol=1e-5, atol=1e-6)


def test_random_draws_and_buffer_writes_cannot_be_exported():
    def noisy(x):
        return x + lf.rand(3)

    with pytest.raises(lf.export.ExportError, match="random"):
        lf.export.export(noisy, (lf.ones(3),))

    class Counter(lf.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("n", lf.zeros(()))

        def forward(self, x):
            self.n.add_(1)
            return x * 2

    with pytest.raises(lf.export.ExportError, match="writes buffer 'n'"):
        lf.export.export(Counter(), (lf.ones(3),))
    assert issubclass(lf.export.ExportError, GraphError)


def test_bad_arguments():
    m = TinyNet()
    x = lf.ones(2, 4)
    with pytest.raises(ArgumentError, match="tuple of tensors"):
        lf.export.export(m, "x")
    with pytest.raises(ArgumentError, match="only tensors"):
        lf.export.export(m, (np.ones((2, 4), np.float32),))
    with pytest.raises(ArgumentError, match=r"names \['y'\]"):
        lf.export.export(m, (x,), dynamic_shapes={"y": {0: lf.export.Dim("b")}})
    with pytest.raises(ArgumentError, match="axis 2"):
        lf.export.export(m, (x,), dynamic_shapes={"x": {2: lf.export.Dim("b")}})
    with pytest.raises(ArgumentError, match="Dim"):
        lf.export.export(m, (x,), dynamic_shapes={"x": {0: "batch"}})
    with pytest.raises(ArgumentError, match="identifier"):
        lf.export.Dim("a b")
    with pytest.raises(ArgumentError, match="keyword"):
        lf.export.export(m, (x,), {"x": x})
    with pytest.raises(TypeError, match="ExportedProgram"):
        lf.export.save(m, "/nonexistent")  # type: ignore[arg-type]


_CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    import lazyflow as lf
    ep = lf.export.load(sys.argv[1])
    assert not any(k.startswith("tests") for k in sys.modules), "the test module was imported"
    x = np.load(sys.argv[2])
    np.save(sys.argv[3], ep(lf.tensor(x)).numpy())
    """
)


def test_saved_program_runs_in_a_fresh_process_without_the_model_class(tmp_path):
    m = TinyNet()
    ep = lf.export.export(m, (lf.tensor(_x(2, 4)),), dynamic_shapes={"x": {0: lf.export.Dim("batch")}})
    path = str(tmp_path / "tiny.lfexport")
    lf.export.save(ep, path)
    x = _x(5, 4, seed=3)
    np.save(tmp_path / "x.npy", x)
    (tmp_path / "child.py").write_text(_CHILD)
    env = dict(os.environ, PYTHONPATH=REPO, JAX_PLATFORMS="cpu")
    r = subprocess.run(
        [sys.executable, str(tmp_path / "child.py"), path, str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
        cwd=str(tmp_path),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), _ref(m, x), rtol=1e-5, atol=1e-6)


def test_the_weights_are_an_ordinary_checkpoint_beside_the_program(tmp_path):
    m = TinyNet()
    want = {k: _np(v) for k, v in m.state_dict().items()}
    lf.export.save(lf.export.export(m, (lf.ones(1, 4),)), str(tmp_path / "e"))
    ck = lf.load(str(tmp_path / "e"))
    assert ck["format"] == "lazyflow.export" and isinstance(ck["program"], bytes)
    assert set(ck["state_dict"]) == set(want)
    for k, v in want.items():
        np.testing.assert_array_equal(ck["state_dict"][k].numpy(), v)
    fresh = TinyNet()
    fresh.load_state_dict(ck["state_dict"])
    x = _x(2, 4)
    np.testing.assert_allclose(_ref(fresh, x), _ref(m, x))


def test_load_round_trip_in_process(tmp_path):
    m, t = _bn_cnn()
    lf.export.save(lf.export.export(m, (lf.ones(2, 2, 6, 6),)), str(tmp_path / "cnn"))
    ep = lf.export.load(str(tmp_path / "cnn"))
    x = _x(2, 2, 6, 6)
    np.testing.assert_allclose(ep(lf.tensor(x)).numpy(), t(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-5)


def _good(tmp_path):
    ep = lf.export.export(TinyNet(), (lf.ones(2, 4),))
    program = bytes(ep.exported.serialize())
    return ep, program


def test_corrupt_or_foreign_checkpoints_raise_checkpoint_errors(tmp_path):
    ep, program = _good(tmp_path)
    sd = dict(ep.state_dict)
    cases = {
        "plain": ({"a": lf.ones(2)}, "not an exported program"),
        "version": ({"format": "lazyflow.export", "version": 99}, "version 99"),
        "sha": (
            {"format": "lazyflow.export", "version": 1, "program": program, "sha256": "0" * 64, "state_dict": sd},
            "SHA-256",
        ),
        "garbage": (
            {
                "format": "lazyflow.export",
                "version": 1,
                "program": b"\x00" * 64,
                "sha256": hashlib.sha256(b"\x00" * 64).hexdigest(),
                "state_dict": sd,
            },
            "does not deserialize",
        ),
        "weights": (
            {
                "format": "lazyflow.export",
                "version": 1,
                "program": program,
                "sha256": hashlib.sha256(program).hexdigest(),
                "state_dict": {**sd, "fc1.weight": lf.ones(3, 3)},
            },
            "fc1.weight",
        ),
        "missing": ({"format": "lazyflow.export", "version": 1}, "missing"),
    }
    for name, (obj, msg) in cases.items():
        lf.save(obj, str(tmp_path / name))
        with pytest.raises(CheckpointError, match=msg):
            lf.export.load(str(tmp_path / name))


def test_flipped_or_truncated_program_file_raises_checkpoint_errors(tmp_path):
    """The program bytes live in the checkpoint's metadata file (checksummed by lf.load); the pointer names it."""
    ep, _ = _good(tmp_path)
    path = tmp_path / "e"
    lf.export.save(ep, str(path))
    (meta,) = path.rglob("metadata.lfpkl")
    pointer = path / "LAZYFLOW_CHECKPOINT"
    for f in (meta, pointer):
        original = f.read_bytes()
        data = bytearray(original)
        data[len(data) // 2] ^= 0xFF
        for bad in (bytes(data), original[: len(original) // 2]):
            f.write_bytes(bad)
            with pytest.raises(CheckpointError):
                lf.export.load(str(path))
        f.write_bytes(original)
    x = _x(2, 4)
    np.testing.assert_allclose(lf.export.load(str(path))(lf.tensor(x)).numpy(), ep(lf.tensor(x)).numpy())
