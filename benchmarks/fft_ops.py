"""``python -m benchmarks.fft_ops``: medians of FFT / STFT forward + backward (issue 12, complex dtypes and lf.fft).

Not part of the suite (``python -m benchmarks``): a hand measurement for BENCHMARKS.md. Each case runs forward +
backward of a real loss per call: lazyflow eager, ``lf.compile`` of the same function, and torch eager on the same
input (torch limited to one thread by ``torch.set_num_threads(1)``; the machine's 2 cores are shared).
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import torch

import lazyflow as lf

CASES = [
    ("rfft |X|^2 (64, 1024)", (64, 1024), lambda m, x: (m.fft.rfft(x).abs() ** 2).sum()),
    ("fft2 ortho re (16, 128, 128)", (16, 128, 128), lambda m, x: m.fft.fft2(x, norm="ortho").real.pow(2).sum()),
    ("irfft(rfft) (64, 1024)", (64, 1024), lambda m, x: (m.fft.irfft(m.fft.rfft(x) * 0.5, n=1024) ** 2).sum()),
    (
        "stft->istft n_fft=256 (8, 16000)",
        (8, 16000),
        lambda m, x: (
            m.istft(m.stft(x, 256, window=m.hann_window(256), return_complex=True), 256, window=m.hann_window(256))
            .pow(2)
            .sum()
        ),
    ),
]


def _median_ms(f, n: int) -> float:
    f()
    f()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3


def main(n: int = 20) -> None:
    torch.set_num_threads(1)
    print("| case (fwd+bwd) | lf eager ms | lf.compile ms | torch ms | eager/torch | compile/torch |")
    print("|---|---|---|---|---|---|")
    for name, shape, fn in CASES:
        a = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        comp = lf.compile(lambda x, fn=fn: fn(lf, x))

        def run_lf(step, fn=fn):
            x = lf.tensor(a, requires_grad=True)
            step(x).backward()
            return np.asarray(x.grad)

        def run_torch(fn=fn):
            x = torch.tensor(a, requires_grad=True)
            fn(torch, x).backward()
            return x.grad.numpy()

        e = _median_ms(lambda: run_lf(lambda x: fn(lf, x)), n)
        c = _median_ms(lambda: run_lf(comp), n)
        t = _median_ms(run_torch, n)
        print(f"| {name} | {e:.2f} | {c:.2f} | {t:.2f} | {e / t:.2f}x | {c / t:.2f}x |")


if __name__ == "__main__":
    main()
