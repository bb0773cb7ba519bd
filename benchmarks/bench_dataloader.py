"""DataLoader throughput (issue 3, section 7): lf.utils.data.DataLoader vs torch.utils.data.DataLoader.

Run: ``python -m benchmarks.bench_dataloader [--quick]``.

The dataset is image-like and torch-free: 256 images stored as ``.npy`` blobs (uint8, 256x256x3), indexed
modulo 256; a sample is decoded with ``np.load``, randomly cropped to 224x224, randomly flipped and
normalized to float32 CHW in numpy (numpy's global RNG, which both loaders seed per worker). The same
dataset object and transform feed both loaders; batch 32, ``num_workers`` 0, 1 and 2.

Throughput is measured in steady state: persistent workers, one warm-up epoch (not timed), then epochs
timed alternately for lazyflow and torch; samples/s is the median over those epochs. The time to the
first batch of a fresh loader (worker start-up) is reported separately: torch forks its workers, lazyflow
starts them from a fork server (JAX is multithreaded, fork is unsafe; see lazyflow/utils/data/dataloader.py).
torch runs with one intra-op thread, its fastest setting for this pipeline on 2 cores (with two, its stack
kernels contend with the numpy transform: measured 6x slower without workers).
"""

from __future__ import annotations

import argparse
import io
import statistics
import time

import numpy as np

from benchmarks._util import table

MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)
SCALE = (1.0 / (255.0 * STD)).astype(np.float32)
SHIFT = (-MEAN / STD).astype(np.float32)


class ImageDataset:
    """Encoded uint8 images, decoded and augmented per sample (a map-style dataset for both libraries)."""

    def __init__(self, n: int, n_images: int = 256, size: int = 256, crop: int = 224, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.blobs = []
        for _ in range(n_images):
            buf = io.BytesIO()
            np.save(buf, rng.integers(0, 256, (size, size, 3), dtype=np.uint8))
            self.blobs.append(buf.getvalue())
        self.n, self.size, self.crop = n, size, crop

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int):
        img = np.load(io.BytesIO(self.blobs[index % len(self.blobs)]))
        i, j = np.random.randint(0, self.size - self.crop + 1, size=2)
        x = img[i : i + self.crop, j : j + self.crop]
        if np.random.random() < 0.5:
            x = x[:, ::-1]
        x = x.astype(np.float32) * SCALE + SHIFT
        return np.ascontiguousarray(x.transpose(2, 0, 1)), index % 1000


def _epoch(loader) -> tuple[float, int]:
    t0 = time.perf_counter()
    n = 0
    for x, _ in loader:
        n += x.shape[0]
    return time.perf_counter() - t0, n


def _first_batch(make) -> float:
    t0 = time.perf_counter()
    loader = make()
    it = iter(loader)
    next(it)
    dt = time.perf_counter() - t0
    del it, loader
    return dt


def run(quick: bool = False) -> dict:
    """Measure samples/s for num_workers 0, 1, 2 (batch 32) for both loaders.

    Args:
        quick: a short run (fewer samples and epochs) for smoke tests.
    Returns:
        ``{"cases": [{"case", "lf_samples_per_s", "torch_samples_per_s", "ratio", ...}], ...}``.
    """
    import torch
    import torch.utils.data as tud

    import lazyflow as lf
    import lazyflow.utils.data as lud

    torch.set_num_threads(1)  # torch's fastest setting here: two intra-op threads contend with the transform
    n = 256 if quick else 1536
    epochs = 2 if quick else 5
    ds = ImageDataset(n, n_images=64 if quick else 256)  # plain class: both loaders take any map-style object
    cases = []
    for workers in (0, 1, 2):
        kw = dict(batch_size=32, shuffle=True, num_workers=workers)
        if workers:
            kw["persistent_workers"] = True
        lf_loader = lud.DataLoader(ds, generator=lf.Generator().manual_seed(0), **kw)
        t_loader = tud.DataLoader(ds, generator=torch.Generator().manual_seed(0), **kw)
        _epoch(lf_loader)  # warm-up: workers start, JAX compiles nothing, shared memory slots grow
        _epoch(t_loader)
        lf_rates, t_rates = [], []
        for _ in range(epochs):
            dt, k = _epoch(lf_loader)
            lf_rates.append(k / dt)
            dt, k = _epoch(t_loader)
            t_rates.append(k / dt)
        del lf_loader, t_loader
        row = {
            "case": f"num_workers={workers}, batch 32",
            "lf_samples_per_s": statistics.median(lf_rates),
            "torch_samples_per_s": statistics.median(t_rates),
        }
        row["ratio"] = row["lf_samples_per_s"] / row["torch_samples_per_s"]
        if workers:
            kw.pop("persistent_workers")
            row["lf_first_batch_s"] = _first_batch(lambda: lud.DataLoader(ds, **kw))
            row["torch_first_batch_s"] = _first_batch(lambda: tud.DataLoader(ds, **kw))
        cases.append(row)
    rows = [
        (
            c["case"],
            f"{c['lf_samples_per_s']:.0f}",
            f"{c['torch_samples_per_s']:.0f}",
            f"{c['ratio']:.2f}x",
            f"{c['lf_first_batch_s']:.2f} s / {c['torch_first_batch_s']:.2f} s" if "lf_first_batch_s" in c else "-",
        )
        for c in cases
    ]
    print(table(rows, ["case", "lazyflow samples/s", "torch samples/s", "lf / torch", "first batch lf / torch"]))
    print("(target: lf / torch >= 1.0x; steady state with persistent workers, median over epochs)")
    return {"cases": cases, "samples_per_epoch": n, "epochs": epochs, "target_ratio_at_least": 1.0}


def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    run(parser.parse_args().quick)


if __name__ == "__main__":
    _main()
