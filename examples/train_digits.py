"""Train a small CNN on scikit-learn's bundled handwritten digits, eagerly and as a compiled graph.

    pip install -e ".[examples]" && python examples/train_digits.py

With no arguments: a few epochs in eager mode, a checkpoint (``lf.save``), a resume from that checkpoint into a
fresh model trained by an ``lf.nn.Graph`` step (forward, backward and SGD update in one XLA program), a second
checkpoint, and a final evaluation with ``lf.compile(model).eval()``. Loss and test accuracy are printed per epoch
and plotted (``OUT/training.png``, the mode switch marked). Ctrl-C saves ``OUT/interrupted`` before exiting.
No download: the 1797 8x8 images ship with scikit-learn.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import lazyflow as lf
from lazyflow import nn
from lazyflow.nn import functional as F
from lazyflow.utils.data import DataLoader, TensorDataset


def make_model(nn_mod=nn) -> nn.Module:
    """Two Conv-BN-ReLU blocks, a pool and a linear classifier (8x8 inputs, 10 classes).

    ``nn_mod=torch.nn`` builds the same network in torch (same keys and shapes): the tests check lazyflow's
    checkpoints against it.
    """
    return nn_mod.Sequential(
        nn_mod.Conv2d(1, 16, 3, padding=1),
        nn_mod.BatchNorm2d(16),
        nn_mod.ReLU(),
        nn_mod.Conv2d(16, 32, 3, padding=1),
        nn_mod.BatchNorm2d(32),
        nn_mod.ReLU(),
        nn_mod.MaxPool2d(2),
        nn_mod.Flatten(),
        nn_mod.Linear(32 * 4 * 4, 10),
    )


def load_data(seed: int):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.images.astype(np.float32) / 16.0)[:, None]  # (N, 1, 8, 8) in [0, 1]
    y = digits.target.astype(np.int64)
    return train_test_split(x, y, test_size=0.2, stratify=y, random_state=seed)


class TrainStep(nn.Graph):
    """One SGD step as one compiled program."""

    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        return loss


def evaluate(model_fn, x_test, y_test, batch: int = 512) -> float:
    correct = 0
    with lf.no_grad():
        for i in range(0, len(x_test), batch):
            logits = model_fn(lf.tensor(x_test[i : i + batch]))
            correct += int((logits.argmax(1).numpy() == y_test[i : i + batch]).sum())
    return correct / len(x_test)


def _progress(it, desc, total, enabled):
    if not enabled:
        return it
    from tqdm import tqdm

    return tqdm(it, desc=desc, total=total, leave=False, ncols=80)


def train_epochs(mode, model, opt, loader, x_test, y_test, epochs, start_epoch, hist, *, progress, quick):
    step = TrainStep(model, opt) if mode == "graph" else None
    evaluator = lf.compile(model)
    for epoch in range(start_epoch, start_epoch + epochs):
        model.train()
        losses, t0 = [], time.perf_counter()
        for b, (xb, yb) in enumerate(_progress(loader, f"epoch {epoch + 1} [{mode}]", len(loader), progress)):
            if quick and b >= 8:
                break
            if step is not None:
                loss = step(xb, yb)
            else:
                loss = F.cross_entropy(model(xb), yb)
                loss.backward()
                opt.step()
                opt.zero_grad()
            losses.append(loss.item())
        model.eval()
        acc = evaluate(evaluator, x_test, y_test)
        hist.append({"epoch": epoch + 1, "mode": mode, "loss": float(np.mean(losses)), "acc": acc})
        print(
            f"epoch {epoch + 1:2d} [{mode:5s}] loss {np.mean(losses):.4f}  test acc {acc:.4f}  "
            f"({time.perf_counter() - t0:.1f} s)",
            flush=True,
        )
    return hist


def save_plot(hist, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ep = [h["epoch"] for h in hist]
    fig, ax1 = plt.subplots(figsize=(7, 4))
    ax1.plot(ep, [h["loss"] for h in hist], "o-", color="tab:blue", label="train loss")
    ax1.set_xlabel("epoch")
    ax1.set_ylabel("loss", color="tab:blue")
    ax2 = ax1.twinx()
    ax2.plot(ep, [h["acc"] for h in hist], "s-", color="tab:green", label="test accuracy")
    ax2.set_ylabel("test accuracy", color="tab:green")
    for a, b in zip(hist, hist[1:]):
        if a["mode"] != b["mode"]:
            ax1.axvline(a["epoch"] + 0.5, color="gray", ls="--")
            ax1.text(
                a["epoch"] + 0.55,
                0.5,
                f"{a['mode']} -> {b['mode']}",
                color="gray",
                rotation=90,
                va="center",
                transform=ax1.get_xaxis_transform(),
            )  # x in data, y in axes coordinates
    ax1.set_title("lazyflow: digits CNN")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=["eager", "graph", "both"], default="both")
    ap.add_argument("--epochs", type=int, default=8, help="total epochs (split in half with --mode both)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--resume", default=None, help="checkpoint directory to resume from")
    ap.add_argument("--out", default="out/digits")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="8 batches per epoch (smoke runs)")
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    lf.manual_seed(a.seed)
    x_train, x_test, y_train, y_test = load_data(a.seed)
    ds = TensorDataset(lf.tensor(x_train), lf.tensor(y_train))
    loader = DataLoader(
        ds, batch_size=a.batch_size, shuffle=True, drop_last=True, generator=lf.Generator().manual_seed(a.seed)
    )
    model = make_model()
    opt = lf.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, weight_decay=1e-4)
    hist, start = [], 0
    if a.resume:
        ck = lf.load(a.resume)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optim"])
        hist, start = list(ck["history"]), int(ck["epoch"])
        print(f"resumed from {a.resume} at epoch {start}")
    plan = {
        "eager": [("eager", a.epochs)],
        "graph": [("graph", a.epochs)],
        "both": [("eager", a.epochs // 2), ("graph", a.epochs - a.epochs // 2)],
    }[a.mode]
    progress = not a.no_progress and sys.stderr.isatty()
    checkpoints = []
    try:
        for i, (mode, n) in enumerate(plan):
            if i > 0:
                # resume in a fresh model/optimizer from the checkpoint just written: nothing to convert
                ck = lf.load(checkpoints[-1])
                model = make_model()
                opt = lf.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, weight_decay=1e-4)
                model.load_state_dict(ck["model"])
                opt.load_state_dict(ck["optim"])
                print(f"resumed from {checkpoints[-1]} in {mode} mode")
            hist = train_epochs(
                mode, model, opt, loader, x_test, y_test, n, start, hist, progress=progress, quick=a.quick
            )
            start += n
            path = os.path.join(a.out, f"ckpt_{mode}")
            lf.save({"model": model.state_dict(), "optim": opt.state_dict(), "epoch": start, "history": hist}, path)
            checkpoints.append(path)
    except KeyboardInterrupt:
        path = os.path.join(a.out, "interrupted")
        lf.save({"model": model.state_dict(), "optim": opt.state_dict(), "epoch": start, "history": hist}, path)
        print(f"\ninterrupted: saved {path} (resume with --resume {path})")
        raise SystemExit(130) from None
    cm = lf.compile(model).eval()
    final = evaluate(cm, x_test, y_test)
    plot = os.path.join(a.out, "training.png")
    save_plot(hist, plot)
    print(f"final test accuracy (lf.compile(model).eval()): {final:.4f}; plot: {plot}")
    return {"history": hist, "final_acc": final, "checkpoints": checkpoints, "plot": plot}


if __name__ == "__main__":
    main()
