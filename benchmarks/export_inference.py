"""``python -m benchmarks.export_inference``: export time and inference medians of lf.export / lf.onnx (issue 16).

Not part of the suite (``python -m benchmarks``): a hand measurement for BENCHMARKS.md. For an MLP, a CNN with
BatchNorm/MaxPool and a 2-layer Transformer encoder in eval mode: wall time of ``lf.export.export`` and of
``lf.onnx.export`` (one call each, tracing included), then the median over 100 calls of the exported StableHLO
program, ``lf.compile(model)`` and onnxruntime (one intra-op thread: the machine's 2 cores are shared) on the same
input, each result brought to the host.
"""

from __future__ import annotations

import statistics
import time

import onnxruntime as ort

import lazyflow as lf


def _median_ms(f, n: int = 100) -> float:
    f()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3


def _models():
    nn = lf.nn
    return {
        "mlp": (nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)), (32, 64)),
        "cnn": (
            nn.Sequential(
                nn.Conv2d(3, 16, 3, padding=1),
                nn.BatchNorm2d(16),
                nn.ReLU(),
                nn.MaxPool2d(2),
                nn.Conv2d(16, 32, 3, padding=1),
                nn.ReLU(),
                nn.MaxPool2d(2),
                nn.Flatten(),
                nn.Linear(32 * 8 * 8, 10),
            ),
            (8, 3, 32, 32),
        ),
        "transformer": (
            nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 4, 128, batch_first=True), 2),
            (8, 32, 64),
        ),
    }


def main() -> None:
    print("| model (input) | lf.export.export ms | lf.onnx.export ms | exported ms | lf.compile ms | onnxruntime ms |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, (m, shape) in _models().items():
        m.eval()
        x = lf.randn(*shape)
        xn = x.numpy()
        t = time.perf_counter()
        ep = lf.export.export(m, (x,))
        t_export = time.perf_counter() - t
        t = time.perf_counter()
        proto = lf.onnx.export(m, (x,))
        t_onnx = time.perf_counter() - t
        assert proto is not None
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        sess = ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        cm = lf.compile(m)
        with lf.no_grad():
            r_ep = _median_ms(lambda: ep(x).numpy())
            r_cm = _median_ms(lambda: cm(x).numpy())
            r_ort = _median_ms(lambda: sess.run(None, {"input0": xn}))
        print(f"| {name} {shape} | {t_export * 1e3:.0f} | {t_onnx * 1e3:.0f} | {r_ep:.2f} | {r_cm:.2f} | {r_ort:.2f} |")


if __name__ == "__main__":
    main()
