"""The benchmark suite: every ``benchmarks/bench_*.py`` module, one table of ratios, BENCHMARKS.md and a plot.

    python -m benchmarks [--quick] [--only eager,graph:mlp_b1+mlp_b64] [--no-write] [--verbose]
    python benchmarks/run.py ...          (the same)

Each module runs in its own subprocess, so a missing module, an exception, a crash or a timeout becomes a FAILED
row instead of the end of the suite, and no module inherits another's caches or threads. A module returns its
measurements from ``run(quick)``; an adapter per module (below) turns them into rows of one convention:

    ratio = lazyflow time / reference time        (below 1.00x: lazyflow is faster)

Throughputs and bandwidths become times for the same work, so every target reads "ratio <= bound", next to the
issue that set it. A module may also return rows in that form directly: a list of dicts with keys ``case``,
``versus``, ``lf`` and ``ref`` (seconds), optionally ``target`` (an upper bound on the ratio), ``target_text`` and
``note``. ``NAME:CASE+CASE`` in ``--only`` passes ``only=[CASE, ...]`` to modules whose ``run`` accepts it.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import inspect
import json
import math
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if __package__ in (None, ""):  # `python benchmarks/run.py`: make `benchmarks` importable
    sys.path.insert(0, ROOT)

# the issues' benchmark modules, in report order; any other benchmarks/bench_*.py is picked up after them, and
# "disk" (the disk's own bandwidth, measured here) closes the table
EXPECTED = ("eager", "graph", "optim", "dataloader", "checkpoint", "conv", "startup")


def discover_modules() -> tuple[str, ...]:
    """The expected modules (a missing one is reported as FAILED), then every other ``bench_*.py``, then disk."""
    found = {
        f[len("bench_") : -len(".py")]
        for f in os.listdir(os.path.join(ROOT, "benchmarks"))
        if f.startswith("bench_") and f.endswith(".py")
    }
    return (*EXPECTED, *sorted(found - set(EXPECTED)), "disk")


MODULES = discover_modules()
DEFAULT_MD = os.path.join(ROOT, "BENCHMARKS.md")
DEFAULT_PLOT = os.path.join(ROOT, "benchmarks", "ratios.png")
DISTS = {
    "python": None,
    "jax": "jax",
    "jaxlib": "jaxlib",
    "torch": "torch",
    "numpy": "numpy",
    "orbax": "orbax-checkpoint",
    "lazyflow": "lazyflow",
}


@dataclass
class Row:
    """One line of the table: lazyflow against one reference on one case (times in seconds)."""

    bench: str
    case: str
    versus: str = ""
    lf: float | None = None
    ref: float | None = None
    bound: float | None = None  # the target: ratio <= bound
    target: str = ""
    note: str = ""
    error: str | None = None

    def __post_init__(self):
        self.lf, self.ref, self.bound = _num(self.lf), _num(self.ref), _num(self.bound)

    @property
    def ratio(self) -> float | None:
        if self.lf is None or self.ref is None or not self.ref or math.isnan(self.lf) or math.isnan(self.ref):
            return None
        return self.lf / self.ref

    @property
    def met(self) -> str:
        if self.error:
            return "FAILED"
        if self.bound is None:
            return "-"
        if self.ratio is None:
            return "n/a"
        return "yes" if self.ratio <= self.bound else "NO"


# ---------------------------------------------------------------------------------------------------- child side


def _plain(obj):
    """JSON-able copy of a module's result (numpy scalars/arrays, tuples, NaN, odd objects as strings)."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, (int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else repr(obj)  # 'nan' / 'inf' survive JSON as strings
    if hasattr(obj, "item") and getattr(obj, "ndim", 1) == 0:
        return _plain(obj.item())
    if hasattr(obj, "tolist"):
        return _plain(obj.tolist())
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if hasattr(obj, "__dataclass_fields__"):
        return {k: _plain(getattr(obj, k)) for k in obj.__dataclass_fields__}
    if hasattr(obj, "_asdict"):
        return _plain(obj._asdict())
    return str(obj)


def _child(name: str, quick: bool, cases: list[str] | None, result_path: str) -> int:
    """Run one module's ``run`` in this (child) process and write its result as JSON."""
    out: dict = {}
    try:
        if name == "disk":
            fn = bench_disk
        else:
            try:
                mod = importlib.import_module(f"benchmarks.bench_{name}")
            except ModuleNotFoundError as e:
                if e.name in (f"benchmarks.bench_{name}",):
                    out["error"] = f"missing module benchmarks/bench_{name}.py"
                    return 1
                raise
            fn = getattr(mod, "run", None)
            if fn is None:
                out["error"] = f"benchmarks/bench_{name}.py has no run(quick) function"
                return 1
        kwargs = {}
        params = inspect.signature(fn).parameters
        if cases and "only" in params:
            kwargs["only"] = cases
        result = fn(quick, **kwargs) if params else fn()
        report = getattr(mod, "report", None) if name != "disk" else None
        if callable(report):  # modules that return data and format it separately
            print(report(result))
        out["result"] = _plain(result)
        return 0
    except BaseException as e:
        out["error"] = "".join(traceback.format_exception_only(type(e), e)).strip()
        out["traceback"] = traceback.format_exc()
        traceback.print_exc()
        return 1
    finally:
        with open(result_path, "w") as f:
            json.dump(out, f)


def bench_disk(quick: bool) -> dict:
    """The disk's own write bandwidth: ``dd conv=fdatasync`` (median of repeats) and a read back, into a temp dir."""
    mb, repeat = (64, 3) if quick else (400, 5)
    d = tempfile.mkdtemp(prefix="lf_disk_", dir=os.environ.get("LAZYFLOW_BENCH_DIR"))
    path = os.path.join(d, "dd.bin")
    writes, reads = [], []
    try:
        for _ in range(repeat):
            t0 = time.perf_counter()
            subprocess.run(
                ["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={mb}", "conv=fdatasync"],
                check=True,
                capture_output=True,
            )
            writes.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            with open(path, "rb") as f:
                while f.read(1 << 24):
                    pass
            reads.append(time.perf_counter() - t0)
            os.remove(path)
    finally:
        if os.path.exists(path):
            os.remove(path)
        os.rmdir(d)
    w, r = statistics.median(writes), statistics.median(reads)
    print(
        f"disk: dd {mb} MB conv=fdatasync {mb / 1024 / w:.2f} GB/s (median of {repeat}); "
        f"read back (page cache) {mb / 1024 / r:.2f} GB/s"
    )
    return {"bytes": mb << 20, "write_s": w, "read_s": r, "write_gbps": mb / 1024 / w, "read_gbps": mb / 1024 / r}


# --------------------------------------------------------------------------------------------------- adapters


def _adapt_eager(res) -> list[Row]:
    rows = []
    for r in res.get("dispatch", []):
        case = f"dispatch {r['op']} (16x16, cache hit)"
        rows += [
            Row("eager", case, "bare jax.jit", r["lazyflow"], r["jit"], 1.25, "<= 1.25x (#2)"),
            Row("eager", case, "jnp eager", r["lazyflow"], r["jnp"], 1.0, "< 1.00x, faster (#2)"),
            Row("eager", case, "torch eager", r["lazyflow"], r["torch"]),
        ]
    s = res.get("setitem")
    if s:
        rows += [
            Row(
                "eager",
                "setitem loop: last 10k chunk",
                "first 10k chunk",
                s["last_chunk"],
                s["first_chunk"],
                1.2,
                "<= 1.2x (#2)",
            ),
            Row(
                "eager",
                f"setitem loop: {s['total']} updates",
                "torch eager",
                s["lf_total"],
                s["torch_total"],
                5.0,
                "<= 5x (#2)",
                note=f"{s['lf_total'] / s['total'] * 1e6:.1f} us/update",
            ),
        ]
    return rows


# case -> (Graph vs torch eager bound, its text, eager vs torch eager bound, its text)
_GRAPH_TARGETS = {
    "mlp_b1": (0.25, ">= 4x faster: <= 0.25x (#4)", 1.2, "<= 1.2x (#2; #3: 1.3x)"),
    "mlp_b64": (1 / 1.3, ">= 1.3x faster: <= 0.77x (#4)", 1.2, "<= 1.2x (#2; #3: 1.3x)"),
    "small_cnn": (1.0, "<= 1.00x (#4)", 1.3, "<= 1.3x (#3)"),
    "transformer": (1.0, "<= 1.00x (#4)", None, ""),
}


def _graph_targets(case: str):
    if case.startswith("resnet"):
        return (1 / 1.1, ">= 1.1x faster: <= 0.91x (#4)", None, "")
    return _GRAPH_TARGETS.get(case, (None, "", None, ""))


def _adapt_graph(res) -> list[Row]:
    rows = []
    for r in res:
        case = r["case"]
        g_bound, g_text, e_bound, e_text = _graph_targets(case)
        rows.append(
            Row("graph", f"{case} step, lf.nn.Graph", "torch eager", r.get("lf_graph"), r.get("torch"), g_bound, g_text)
        )
        if "torch_compile" in r:
            rows.append(Row("graph", f"{case} step, lf.nn.Graph", "torch.compile", r["lf_graph"], r["torch_compile"]))
        if "jax_jit" in r:
            rows.append(
                Row(
                    "graph",
                    f"{case} step, lf.nn.Graph",
                    "hand-written jax.jit",
                    r["lf_graph"],
                    r["jax_jit"],
                    *((1.1, "<= 1.1x (#4)") if case.startswith("mlp") else (None, "")),
                )
            )
        if "lf_compile_fwd" in r:
            rows.append(
                Row(
                    "graph",
                    f"{case} forward, lf.compile",
                    "jax.jit forward",
                    r["lf_compile_fwd"],
                    r["jax_jit_fwd"],
                    1.1,
                    "<= 1.1x (#14)",
                )
            )
        if "lf_eager" in r:
            rows.append(
                Row("graph", f"{case} step, lf eager", "torch eager", r["lf_eager"], r.get("torch"), e_bound, e_text)
            )
            if "torch_compile" in r:
                rows.append(Row("graph", f"{case} step, lf eager", "torch.compile", r["lf_eager"], r["torch_compile"]))
        if "lf_graph_first_call_s" in r and "jax_jit_compile_s" in r:
            rows.append(
                Row(
                    "graph",
                    f"{case} first Graph call (compile)",
                    "jax.jit first call (each in a fresh process)" if r.get("first_calls_fresh") else "jax.jit compile",
                    r["lf_graph_first_call_s"],
                    r["jax_jit_compile_s"],
                    1.2,
                    "<= 1.2x (#4)",
                )
            )
        if "lf_graph_first_call_s" in r and "torch_compile_first_call_s" in r:
            rows.append(
                Row(
                    "graph",
                    f"{case} first Graph call (compile)",
                    "torch.compile first call",
                    r["lf_graph_first_call_s"],
                    r["torch_compile_first_call_s"],
                    1.0,
                    "< 1.00x (#4)",
                )
            )
    return rows


def _adapt_checkpoint(res) -> list[Row]:
    rows = []
    r = res.get("resnet50_sgd")
    if r:
        case = "ResNet-50 + SGD-momentum state: save + load"
        note = (
            f"save {_fmt_time(r['lf_save'])} vs {_fmt_time(r['torch_save'])}, "
            f"load {_fmt_time(r['lf_load'])} vs {_fmt_time(r['torch_load'])}"
        )
        rows.append(
            Row(
                "checkpoint",
                case,
                "torch.save + torch.load",
                r["lf_save"] + r["lf_load"],
                r["torch_save"] + r["torch_load"],
                r.get("target", 1.0),
                f"<= {r.get('target', 1.0):g}x (#5)",
                note,
            )
        )
        if "orbax_save" in r:
            rows.append(
                Row(
                    "checkpoint",
                    case,
                    "raw orbax StandardCheckpointer",
                    r["lf_save"] + r["lf_load"],
                    r["orbax_save"] + r["orbax_load"],
                )
            )
    s = res.get("small_1000")
    if s:
        rows.append(
            Row(
                "checkpoint",
                "1000 small tensors: save + load",
                "torch.save + torch.load",
                s["lf_save"] + s["lf_load"],
                s["torch_save"] + s["torch_load"],
                s.get("target", 2.0),
                f"<= {s.get('target', 2.0):g}x (#5)",
            )
        )
    b = res.get("big_400mb")
    if b:
        n = b["nbytes"]
        mb = f"one {n >> 20} MB tensor"
        save_t = b.get("save_target", 0.8)
        load_bw = b.get("load_target", 1e9)
        rows += [
            Row(
                "checkpoint",
                f"{mb}: save",
                "dd conv=fdatasync (same bytes)",
                b["lf_save"],
                n / b["dd_fdatasync_bw"],
                1 / save_t,
                f">= {save_t:g}x dd bandwidth: <= {1 / save_t:.2f}x (#5)",
                f"{n / b['lf_save'] / 1e9:.2f} GB/s vs dd {b['dd_fdatasync_bw'] / 1e9:.2f} GB/s",
            ),
            Row("checkpoint", f"{mb}: save", "torch.save", b["lf_save"], b["torch_save"]),
            Row(
                "checkpoint",
                f"{mb}: load",
                f"{load_bw / 1e9:g} GB/s",
                b["lf_load"],
                n / load_bw,
                1.0,
                f">= {load_bw / 1e9:g} GB/s: <= 1.00x (#5)",
                f"{n / b['lf_load'] / 1e9:.2f} GB/s",
            ),
            Row("checkpoint", f"{mb}: load", "torch.load", b["lf_load"], b["torch_load"]),
        ]
    a = res.get("async_save")
    if a:
        rows.append(
            Row(
                "checkpoint",
                "async save: time the call blocks",
                "synchronous lf.save",
                a["blocking"],
                a["sync_save"],
                a.get("target", 0.1),
                f"<= {a.get('target', 0.1):g}x (#5)",
            )
        )
    return rows


def _adapt_dataloader(res) -> list[Row]:
    at_least = res.get("target_ratio_at_least", 1.0)
    rows = []
    for c in res["cases"]:
        lf_rate, t_rate = c["lf_samples_per_s"], c["torch_samples_per_s"]
        rows.append(
            Row(
                "dataloader",
                f"DataLoader {c['case']}: time per sample",
                "torch DataLoader",
                1 / lf_rate if lf_rate else None,
                1 / t_rate if t_rate else None,
                1 / at_least,
                f">= {at_least:g}x torch's samples/s: <= {1 / at_least:.2f}x (#3)",
                f"{lf_rate:.0f} vs {t_rate:.0f} samples/s",
            )
        )
        if "lf_first_batch_s" in c:
            rows.append(
                Row(
                    "dataloader",
                    f"DataLoader {c['case']}: first batch (worker start)",
                    "torch DataLoader",
                    c["lf_first_batch_s"],
                    c["torch_first_batch_s"],
                )
            )
    return rows


def _adapt_optim(res) -> list[Row]:
    rows = []
    for c in res["cases"]:
        rows.append(
            Row(
                "optim",
                c["case"],
                "torch foreach",
                c["lf"],
                c["torch_foreach"],
                1.0,
                "<= 1.00x (#3)",
                f"first step (compile) {_fmt_time(c.get('lf_first_step'))}",
            )
        )
        if "torch_single" in c:
            rows.append(Row("optim", c["case"], "torch single-tensor (CPU default)", c["lf"], c["torch_single"]))
    return rows


def _adapt_disk(res) -> list[Row]:
    return [
        Row(
            "disk",
            f"dd {res['bytes'] >> 20} MB conv=fdatasync",
            "",
            None,
            None,
            note=f"write {res['write_gbps']:.2f} GB/s, read back {res['read_gbps']:.2f} GB/s",
        )
    ]


_LF_KEY = re.compile(r"^(lf|lazyflow)(_|$)", re.I)
_REF_KEY = re.compile(r"torch|jax|jit|jnp|orbax|numpy|pickle|dd|disk|ref", re.I)
_RATE_KEY = re.compile(r"per_s|per_sec|throughput|bandwidth|gbps|mbps|samples_s|_sps$|_bw", re.I)
_LABEL_KEYS = ("case", "name", "op", "what", "label", "kind", "test")


def _is_rows(res) -> bool:
    return (
        isinstance(res, list)
        and bool(res)
        and all(isinstance(r, dict) and "versus" in r and "lf" in r and "ref" in r for r in res)
    )


def _adapt_rows(name: str, res) -> list[Row]:
    return [
        Row(
            name,
            str(r.get("case", "")),
            str(r["versus"]),
            _num(r["lf"]),
            _num(r["ref"]),
            _num(r.get("target")),
            str(r.get("target_text", "")),
            str(r.get("note", "")),
        )
        for r in res
    ]


def _num(v) -> float | None:
    """A number from a result field (NaN/inf arrive as strings from JSON); None when absent or not a number."""
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return None if v is None or isinstance(v, bool) else float(v)


def _adapt_generic(name: str, res) -> list[Row]:
    """Fallback for an unrecognized result: pair every ``lf*``/``lazyflow*`` number with every reference-looking
    number in the same dict (rates are inverted into times)."""
    rows: list[Row] = []

    def visit(obj, path):
        if isinstance(obj, dict):
            label = next((str(obj[k]) for k in _LABEL_KEYS if isinstance(obj.get(k), (str, int))), None)
            nums = {k: _num(v) for k, v in obj.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
            lf_keys = [k for k in nums if _LF_KEY.search(k)]
            ref_keys = [k for k in nums if not _LF_KEY.search(k) and _REF_KEY.search(k)]
            case = " ".join([*path, label] if label else path) or name
            for a in lf_keys:
                for b in ref_keys:
                    if bool(_RATE_KEY.search(a)) != bool(_RATE_KEY.search(b)):
                        continue
                    lf, ref = nums[a], nums[b]
                    if _RATE_KEY.search(a):
                        lf, ref = (1 / lf if lf else None), (1 / ref if ref else None)
                    rows.append(Row(name, f"{case}: {a}", b, lf, ref, note="generic adapter"))
            for k, v in obj.items():
                if isinstance(v, (dict, list)):
                    visit(v, [*path, str(k)])
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                visit(v, path if isinstance(v, dict) and any(k in v for k in _LABEL_KEYS) else [*path, str(i)])

    visit(res, [])
    return rows or [Row(name, "(no ratio recognized in the result)", note="see the module's output below")]


ADAPTERS = {
    "eager": _adapt_eager,
    "graph": _adapt_graph,
    "checkpoint": _adapt_checkpoint,
    "dataloader": _adapt_dataloader,
    "optim": _adapt_optim,
    "disk": _adapt_disk,
}


def adapt(name: str, res) -> list[Row]:
    """The module's result as rows; a result the adapter cannot read is reported, not raised."""
    if _is_rows(res):
        return _adapt_rows(name, res)
    try:
        if name in ADAPTERS:
            return ADAPTERS[name](res)
        return _adapt_generic(name, res)
    except Exception as e:
        rows = _adapt_generic(name, res)
        rows.append(Row(name, "adapter", note=f"result not in the expected shape ({type(e).__name__}: {e})"))
        return rows


# -------------------------------------------------------------------------------------------------- parent side


def _run_module(name: str, quick: bool, cases, timeout, verbose: bool) -> tuple[list[Row], str, float]:
    """Run one module in a subprocess; returns its rows, its captured output and the seconds it took."""
    fd, result_path = tempfile.mkstemp(prefix=f"lf_bench_{name}_", suffix=".json")
    os.close(fd)
    cmd = [sys.executable, "-m", "benchmarks.run", "--child", name, "--result", result_path]
    cmd += ["--quick"] if quick else []
    cmd += ["--cases", "+".join(cases)] if cases else []
    env = dict(
        os.environ,
        PYTHONUNBUFFERED="1",
        PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p),
    )
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    timed_out = threading.Event()

    def kill():
        timed_out.set()
        proc.kill()

    timer = threading.Timer(timeout, kill) if timeout else None
    if timer:
        timer.start()
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if verbose:
                sys.stdout.write(f"[{name}] {line}")
                sys.stdout.flush()
        rc = proc.wait()
    finally:
        if timer:
            timer.cancel()
    elapsed = time.perf_counter() - t0
    output = "".join(lines)
    try:
        with open(result_path) as f:
            payload = json.load(f)
    except (OSError, ValueError):
        payload = {}
    finally:
        os.remove(result_path)
    if timed_out.is_set():
        return [Row(name, "FAILED", error=f"timed out after {timeout:.0f} s")], output, elapsed
    if "error" in payload:
        return [Row(name, "FAILED", error=payload["error"].splitlines()[-1])], output, elapsed
    if rc != 0 or "result" not in payload:
        tail = output.strip().splitlines()[-1:] or ["no output"]
        return [Row(name, "FAILED", error=f"exit code {rc}: {tail[0]}")], output, elapsed
    return adapt(name, payload["result"]), output, elapsed


def _fmt_time(s: float | None) -> str:
    if s is None or math.isnan(s):
        return "-"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.2f} us"


def _cells(r: Row) -> list[str]:
    ratio = r.ratio
    return [
        r.bench,
        r.case,
        r.versus or "-",
        _fmt_time(r.lf),
        _fmt_time(r.ref),
        f"{ratio:.2f}x" if ratio is not None else "-",
        r.target or "-",
        r.met,
        r.error or r.note or "",
    ]


HEADERS = ["benchmark", "case", "versus", "lazyflow", "reference", "ratio", "target", "met", "note"]


def format_table(rows: list[Row]) -> str:
    """The console table (fixed-width columns)."""
    cells = [_cells(r) for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(HEADERS)]
    line = lambda c: " | ".join(x.ljust(w) for x, w in zip(c, widths)).rstrip()
    return "\n".join([line(HEADERS), "-+-".join("-" * w for w in widths), *map(line, cells)])


def _markdown_table(rows: list[Row]) -> str:
    esc = lambda s: s.replace("|", "\\|")
    out = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    out += ["| " + " | ".join(esc(c) for c in _cells(r)) + " |" for r in rows]
    return "\n".join(out)


def machine_info() -> dict:
    """Cores, CPU model and RAM (from /proc where it exists), OS and versions of the stack."""
    from importlib import metadata

    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    ram = "unknown"
    try:
        with open("/proc/meminfo") as f:
            kb = int(next(line for line in f if line.startswith("MemTotal")).split()[1])
        ram = f"{kb / 1024**2:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    versions = {}
    for key, dist in DISTS.items():
        if dist is None:
            versions[key] = platform.python_version()
            continue
        try:
            versions[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[key] = "not installed"
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        if commit:
            versions["lazyflow"] += f" (git {commit})"
    except (OSError, subprocess.SubprocessError):
        pass
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "ram": ram,
        "os": f"{platform.system()} {platform.release()}",
        "versions": versions,
    }


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def save_plot(rows: list[Row], path: str) -> bool:
    """Horizontal bars of every ratio (log scale), green = target met, red = missed, grey = no target."""
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = [r for r in rows if r.ratio is not None and r.ratio > 0]
    fig, ax = plt.subplots(figsize=(13, max(2.5, 0.26 * len(data) + 1.2)))
    colors = {"yes": "tab:green", "NO": "tab:red"}
    ys = list(range(len(data)))[::-1]
    # bars grow from 1.0 (parity) to the ratio: left for faster than the reference, right for slower
    ax.barh(ys, [r.ratio - 1.0 for r in data], left=1.0, color=[colors.get(r.met, "tab:gray") for r in data])
    for y, r in zip(ys, data):
        if r.bound is not None:
            ax.plot([r.bound], [y], marker="|", color="black", markersize=12, mew=2)
    ax.set_yticks(ys, [_short(f"{r.bench}: {r.case} vs {r.versus}", 95) for r in data], fontsize=7)
    ax.set_ylim(-0.7, len(data) - 0.3)
    ax.axvline(1.0, color="black", lw=0.8)
    if data:
        ax.set_xscale("log")
    ax.set_xlabel("lazyflow time / reference time (log; < 1 = lazyflow faster; | = target)")
    ax.set_title("lazyflow benchmark ratios")
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return True


def write_markdown(
    path: str,
    rows: list[Row],
    outputs: dict,
    info: dict,
    command: str,
    quick: bool,
    plot: str | None,
    started: datetime.datetime,
    elapsed: float,
) -> None:
    """Rewrite BENCHMARKS.md: command, machine, versions, date, the table with targets, each module's output; the
    hand-written sections after the modules' output (the level-2 headings there) are kept as they were."""
    v = info["versions"]
    kept = hand_sections(path)
    targets = [r for r in rows if r.met in ("yes", "NO")]
    met = sum(r.met == "yes" for r in targets)
    failed = [r for r in rows if r.error]
    parts = [
        "# Benchmarks",
        "",
        f"Generated by `{command}` on {started:%Y-%m-%d %H:%M} (local time), in {elapsed:.0f} s. Rerun the command "
        "to refresh this file up to the modules' output; the sections after it are written by hand (measurements "
        "with their own commands and dates) and kept across reruns.",
        "",
    ]
    if quick:
        parts += ["> **Quick (smoke) run**: few repeats and reduced cases; the numbers are not meaningful.", ""]
    parts += [
        "## Machine",
        "",
        f"- CPU: {info['cpu']}, {info['cores']} cores ({info['usable_cores']} usable by this process)",
        f"- RAM: {info['ram']}",
        f"- OS: {info['os']}",
        "",
        "## Versions",
        "",
        "| " + " | ".join(v) + " |",
        "|" + "---|" * len(v),
        "| " + " | ".join(v.values()) + " |",
        "",
        "## Ratios",
        "",
        "`ratio` = lazyflow's time / the reference's time for the same work, medians over repeats measured in the "
        "same run (below 1.00x lazyflow is faster). Throughputs and bandwidths are compared as times for the "
        "same amount of work. `target` is the bound set by the issue named in brackets.",
        "",
        f"**{met} of {len(targets)} targets met**" + (f"; {len(failed)} benchmark(s) failed" if failed else "") + ".",
        "",
        _markdown_table(rows),
        "",
    ]
    if plot:
        parts += [f"![ratios]({os.path.relpath(plot, os.path.dirname(os.path.abspath(path)))})", ""]
    parts += [_OUTPUTS_HEADING, ""]
    for name, out in outputs.items():
        text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", out).strip() or "(no output)"
        parts += [f"### {name}", "", "```", text[-20000:], "```", ""]
    if kept:
        parts += [kept.rstrip("\n"), ""]
    with open(path, "w") as f:
        f.write("\n".join(parts))


_OUTPUTS_HEADING = "## Each module's own output"


def hand_sections(path: str) -> str:
    """The text of ``path`` from the first level-2 heading after the modules' output on ("" if none or no file):
    the sections written by hand, which a rerun keeps. Headings inside the output's code blocks do not count."""
    try:
        with open(path) as f:
            lines = f.read().splitlines(keepends=True)
    except FileNotFoundError:
        return ""
    seen, fenced = False, False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.rstrip("\n") == _OUTPUTS_HEADING:
            seen = True
        elif seen and not fenced and line.startswith("## "):
            return "".join(lines[i:])
    return ""


def parse_only(spec: str | None) -> dict[str, list[str] | None]:
    """``"eager,graph:mlp_b1+mlp_b64"`` -> ``{"eager": None, "graph": ["mlp_b1", "mlp_b64"]}``."""
    if not spec:
        return {m: None for m in MODULES}
    out: dict[str, list[str] | None] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, cases = part.partition(":")
        name = name.removeprefix("bench_")
        if name not in MODULES:
            raise SystemExit(f"--only: unknown benchmark {name!r}; expected one of {', '.join(MODULES)}")
        out[name] = [c for c in cases.split("+") if c] or None
    return out


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code (0 unless a benchmark failed)."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: few repeats, reduced cases")
    ap.add_argument("--only", default=None, help=f"comma list of {', '.join(MODULES)} (NAME:CASE+CASE for cases)")
    ap.add_argument("--no-write", action="store_true", help="print only; do not rewrite BENCHMARKS.md or the plot")
    ap.add_argument("--md", default=DEFAULT_MD, help="markdown report path (default: BENCHMARKS.md)")
    ap.add_argument("--plot", default=DEFAULT_PLOT, help="PNG plot path (default: benchmarks/ratios.png)")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per module (default: 900 quick, none)")
    ap.add_argument("-v", "--verbose", action="store_true", help="stream each module's own output")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--result", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--cases", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        return _child(a.child, a.quick, a.cases.split("+") if a.cases else None, a.result)

    selected = parse_only(a.only)
    timeout = a.timeout if a.timeout is not None else (900.0 if a.quick else None)
    command = "python -m benchmarks" + "".join(f" {shlex.quote(x)}" for x in (sys.argv[1:] if argv is None else argv))
    started, t_start = datetime.datetime.now(), time.perf_counter()
    rows: list[Row] = []
    outputs: dict[str, str] = {}
    for name, cases in selected.items():
        print(f"[{name}] running{' (quick)' if a.quick else ''}...", flush=True)
        mrows, outputs[name], secs = _run_module(name, a.quick, cases, timeout, a.verbose)
        rows += mrows
        status = "FAILED: " + mrows[0].error if mrows and mrows[0].error else f"{len(mrows)} rows"
        print(f"[{name}] {status} ({secs:.0f} s)", flush=True)
    elapsed = time.perf_counter() - t_start
    print("\nratio = lazyflow time / reference time (below 1.00x: lazyflow faster); medians over repeats\n")
    print(format_table(rows))
    targets = [r for r in rows if r.met in ("yes", "NO")]
    print(
        f"\n{sum(r.met == 'yes' for r in targets)} of {len(targets)} targets met; "
        f"{sum(bool(r.error) for r in rows)} benchmark(s) failed; {elapsed:.0f} s"
    )
    if not a.no_write:
        for p in (a.md, a.plot):
            os.makedirs(os.path.dirname(os.path.abspath(p)), exist_ok=True)
        plot = a.plot if save_plot(rows, a.plot) else None
        write_markdown(a.md, rows, outputs, machine_info(), command, a.quick, plot, started, elapsed)
        print(f"wrote {a.md}" + (f" and {plot}" if plot else ""))
    return 1 if any(r.error for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
