"""The examples, run in a reduced form, judged on their real outcomes against independent references.

eager_basics: promotion against torch's, gradients against the closed forms, the setitem loop counted in the cache.
interchange: the continued trajectory after lf.save -> resume is recomputed by torch from the same checkpoint.
train_digits: the eager checkpoint resumes in graph mode, the loss keeps falling, and the final model's accuracy
is recomputed by torch from the saved weights; the plot is a PNG that PIL decodes.
"""

from __future__ import annotations

import importlib.util
import math
import os

import numpy as np

import lazyflow as lf

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
import torch


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", os.path.join(EXAMPLES, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_example_has_a_test():
    tested = {"eager_basics", "interchange", "train_digits"}
    found = {f[:-3] for f in os.listdir(EXAMPLES) if f.endswith(".py") and not f.startswith("_")}
    assert found == tested


# ------------------------------------------------------------------------------------------------- eager_basics


def test_eager_basics(capsys):
    ex = load_example("eager_basics")
    lf.eager.clear_cache()
    n = 300
    out = ex.main(["--loop", str(n)])
    printed = capsys.readouterr().out
    assert "cache entry" in printed and "CacheInfo(" in printed
    # the loop v[i] = x compiles one kernel, then hits it
    assert out["loop_new_entries"] == 1
    assert out["loop_misses"] == 1
    assert out["loop_hits"] == n - 1
    assert out["v_sum"] == n * 4
    assert out["w"] == [3.0, 3.0, 3.0]
    # promotion: torch computes the same expressions
    t = torch.tensor
    expected = {
        "int64 tensor + 1.5": t([1, 2]) + 1.5,
        "int64 tensor / 2": t([1, 2]) / 2,
        "uint8 + int8": t([1], dtype=torch.uint8) + t([1], dtype=torch.int8),
        "int32 + float16 tensor": t([1], dtype=torch.int32) + t([1.0], dtype=torch.float16),
        "float16 tensor * 2.0 (scalar is weak)": t([1.0], dtype=torch.float16) * 2.0,
        "bool + 1": t([True]) + 1,
    }
    got = {k: str(v).split(".")[-1] for k, v in out["promotion"].items()}
    assert got == {k: str(v.dtype).split(".")[-1] for k, v in expected.items()}
    # gradients: closed forms at x = [1, 2, 3]
    x = np.array([1.0, 2.0, 3.0])
    g = out["autograd"]
    np.testing.assert_allclose(g["grad"], 2 * x)
    np.testing.assert_allclose(g["grad3"], 3 * x**2)
    np.testing.assert_allclose(g["second"], 6 * x)
    assert g["no_grad"] is False


# -------------------------------------------------------------------------------------------------- interchange


def _torch_continuation(ex, ckpt_path: str, steps: int, seed: int) -> list[float]:
    """Resume the saved state in torch (weights, BN buffers, momentum buffers) and train ``steps`` more steps."""
    ck = lf.load(ckpt_path)
    tm = ex.make_model(torch.nn)
    tm.load_state_dict({k: torch.from_numpy(np.array(v.numpy())) for k, v in ck["model"].items()})
    opt = torch.optim.SGD(tm.parameters(), lr=ex.LR, momentum=ex.MOMENTUM)
    for i, p in enumerate(tm.parameters()):
        opt.state[p]["momentum_buffer"] = torch.from_numpy(np.array(ck["optim"]["state"][i]["momentum_buffer"]))
    x, y = ex.make_data(seed=seed)
    tx, ty = torch.from_numpy(np.array(x.numpy())), torch.from_numpy(np.array(y.numpy()))
    losses = []
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(tm(tx), ty)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def test_interchange(tmp_path, capsys):
    ex = load_example("interchange")
    steps = 4
    out = ex.main(["--steps", str(steps), "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    assert "_orig_mod." in printed
    keys = out["keys"]
    assert keys["eager"] == keys["compiled"] == keys["graph"]
    assert keys["eager"] == list(ex.make_model(torch.nn).state_dict())  # torch's own key names and order
    ck = out["checkpoint_keys"]
    assert ck["eager"] == ck["compiled"] == ck["graph"] and len(ck["eager"]) > len(keys["eager"])
    n_params = len(list(ex.make_model(torch.nn).parameters()))
    opt_keys = out["optim_state_keys"]
    assert opt_keys["eager"] == opt_keys["compiled"] == opt_keys["graph"] == list(range(n_params))
    # continued training: finite, decreasing, picks up where the checkpoint left off, same in every mode ...
    cont = out["continued"]
    for mode, losses in cont.items():
        assert all(math.isfinite(v) for v in losses), mode
        assert all(b < a for a, b in zip(losses, losses[1:])), (mode, losses)
        assert losses[0] < out["before"][0], mode
        np.testing.assert_allclose(losses, cont["eager"], rtol=1e-5, err_msg=mode)
    # ... and equal to what torch computes from the same checkpoint
    ref = _torch_continuation(ex, os.path.join(tmp_path, "eager"), steps, seed=0)
    np.testing.assert_allclose(cont["graph"], ref, rtol=2e-5)
    # lf.compile accepted torch.compile-style keys; torch itself refuses both directions
    assert out["prefixed_load"].missing_keys == [] and out["prefixed_load"].unexpected_keys == []
    tc = out["torch"]
    assert all(k.startswith("_orig_mod.") for k in tc["keys"])
    assert [k.removeprefix("_orig_mod.") for k in tc["keys"]] == tc["plain_keys"]
    loads = [v for k, v in tc.items() if "load_state_dict" in k]
    assert len(loads) == 2 and all(v is not None and "Missing key" in v for v in loads)


# ------------------------------------------------------------------------------------------------- train_digits


def _torch_accuracy(ex, state: dict, x_test: np.ndarray, y_test: np.ndarray) -> float:
    """Test accuracy of the saved weights, computed by the same network built in torch (eval mode)."""
    tm = ex.make_model(torch.nn)
    tm.load_state_dict({k: torch.from_numpy(np.array(v.numpy())) for k, v in state.items()})
    tm.eval()
    with torch.no_grad():
        pred = tm(torch.from_numpy(x_test)).argmax(1).numpy()
    return float((pred == y_test).mean())


def test_train_digits(tmp_path, capsys):
    ex = load_example("train_digits")
    out = ex.main(["--epochs", "4", "--quick", "--out", str(tmp_path), "--no-progress", "--seed", "0"])
    printed = capsys.readouterr().out
    hist = out["history"]
    assert [(h["epoch"], h["mode"]) for h in hist] == [(1, "eager"), (2, "eager"), (3, "graph"), (4, "graph")]
    eager_ck, graph_ck = out["checkpoints"]
    assert f"resumed from {eager_ck} in graph mode" in printed
    _, x_test, _, y_test = ex.load_data(0)

    # the eager checkpoint holds the eager model: torch recomputes its recorded accuracy from the saved weights
    ck = lf.load(eager_ck)
    assert ck["epoch"] == 2 and list(ck["history"]) == hist[:2]
    assert abs(_torch_accuracy(ex, ck["model"], x_test, y_test) - hist[1]["acc"]) <= 1.5 / len(y_test)
    # ... and it loads into a model trained by an lf.nn.Graph step, which trains on from it
    model = ex.make_model()
    opt = lf.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["optim"])
    assert set(opt.state_dict()["state"]) == set(ck["optim"]["state"])
    x_train, _, y_train, _ = ex.load_data(0)
    step = ex.TrainStep(model, opt)
    xb, yb = lf.tensor(x_train[:64]), lf.tensor(y_train[:64])
    losses = [step(xb, yb).item() for _ in range(5)]
    assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0]

    # the run itself: graph epochs continue (not restart) and keep lowering the loss
    assert hist[2]["loss"] < hist[0]["loss"] and hist[3]["loss"] < hist[2]["loss"]
    # final accuracy well above chance (10%), and equal to torch's evaluation of the final checkpoint
    assert out["final_acc"] > 0.6
    final = lf.load(graph_ck)
    assert final["epoch"] == 4
    assert abs(_torch_accuracy(ex, final["model"], x_test, y_test) - out["final_acc"]) <= 1.5 / len(y_test)

    # the plot: a real PNG that both PIL and matplotlib decode
    png = out["plot"]
    assert os.path.dirname(png) == str(tmp_path)
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    from PIL import Image

    with Image.open(png) as im:
        im.verify()
    with Image.open(png) as im:
        assert im.format == "PNG" and im.size[0] > 200 and im.size[1] > 100
    import matplotlib.image

    pixels = matplotlib.image.imread(png)
    assert pixels.ndim == 3 and pixels.std() > 0  # not a blank image
