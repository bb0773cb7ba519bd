"""The benchmark suite runs end to end in its quick form (results are not judged: speed lives in benchmarks/).

One subprocess runs ``python -m benchmarks --quick --no-write`` over every module (the training-step module
narrowed to its smallest case); the rest checks the runner's own machinery: a broken module becomes a FAILED row,
adapters turn results into ratios, and the report files are written.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # benchmarks/ is a top-level package of the repository, not of the installed wheel

from benchmarks import run as runner

BENCH_MODULES = sorted(
    f[len("bench_") : -3]
    for f in os.listdir(os.path.join(ROOT, "benchmarks"))
    if f.startswith("bench_") and f.endswith(".py")
)
# the smallest training step and the per-shape conv timings (not whole ResNets); other quick paths run as they are
SMOKE_CASES = {"graph": "mlp_b1", "conv": "shapes"}


def test_runner_knows_every_module():
    # every bench_*.py file is run, and every module the issues ask for exists
    assert set(runner.MODULES) == {*BENCH_MODULES, "disk"}
    assert set(runner.EXPECTED) <= set(BENCH_MODULES)


# rough seconds of each module's quick run (2 cores): the modules are split into two runner processes that run at
# once (the suite's slowest test otherwise; results are not judged here, only that every module runs)
_COST = {"checkpointing": 30, "checkpoint": 28, "dataloader": 20, "startup": 19, "collectives": 18, "optim": 15}


def _halves(modules):
    halves: tuple[list, list] = ([], [])
    load = [0, 0]
    for m in sorted(modules, key=lambda m: -_COST.get(m, 10)):
        i = 0 if load[0] <= load[1] else 1
        halves[i].append(m)
        load[i] += _COST.get(m, 10)
    return halves


def test_quick_suite_runs_every_module():
    procs = []
    for half in _halves((*BENCH_MODULES, "disk")):
        only = ",".join(f"{m}:{SMOKE_CASES[m]}" if m in SMOKE_CASES else m for m in half)
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "benchmarks", "--quick", "--no-write", "--only", only],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    rows = []
    for proc in procs:
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, out[-4000:] + err[-4000:]
        header = next(line for line in out.splitlines() if line.startswith("benchmark "))
        assert all(h in header for h in runner.HEADERS)
        rows += [line.split(" | ") for line in out.splitlines() if " | " in line and not line.startswith("benchmark ")]
        assert "targets met" in out
    assert {r[0].strip() for r in rows} == {*BENCH_MODULES, "disk"}
    assert not any(r[7].strip() == "FAILED" for r in rows if len(r) > 7), [r for r in rows if "FAILED" in r]
    assert any(r[5].strip().endswith("x") for r in rows)  # at least one ratio was computed


def test_failures_become_rows_not_crashes():
    rows, output, _ = runner._run_module("does_not_exist", True, None, 60, False)
    assert len(rows) == 1 and rows[0].met == "FAILED" and "missing module" in rows[0].error
    table = runner.format_table(rows)
    assert "FAILED" in table and "does_not_exist" in table


def test_adapters():
    eager = {
        "dispatch": [{"op": "add", "lazyflow": 6e-6, "jit": 5e-6, "jnp": 8e-6, "torch": 1e-6}],
        "setitem": {
            "total": 20000,
            "first_chunk": 0.2,
            "last_chunk": 0.3,
            "lf_total": 0.5,
            "torch_total": 0.05,
            "entries": 7,
        },
    }
    rows = runner.adapt("eager", eager)
    by = {(r.case, r.versus): r for r in rows}
    r = by[("dispatch add (16x16, cache hit)", "bare jax.jit")]
    assert r.ratio == pytest.approx(1.2) and r.met == "yes"
    assert by[("setitem loop: last 10k chunk", "first 10k chunk")].met == "NO"  # 1.5x > 1.2x
    assert by[("setitem loop: 20000 updates", "torch eager")].ratio == pytest.approx(10.0)
    # a shape the adapter does not expect is reported (generic pairs + a note), never raised
    odd = runner.adapt("eager", {"dispatch": [{"op": "x"}], "lf_step": 2.0, "torch_step": 1.0})
    assert any(r.case == "adapter" and "not in the expected shape" in r.note for r in odd)
    assert any(r.ratio == pytest.approx(2.0) for r in odd)
    # throughputs are compared as times: twice torch's samples/s is half its time
    gen = runner.adapt("newmod", [{"case": "w0", "lf_samples_per_s": 200.0, "torch_samples_per_s": 100.0}])
    assert [round(r.ratio, 6) for r in gen] == [0.5]
    # modules may return rows in the runner's own form
    own = runner.adapt("x", [{"case": "c", "versus": "torch", "lf": 3.0, "ref": 2.0, "target": 1.0}])
    assert own[0].ratio == pytest.approx(1.5) and own[0].met == "NO"


def test_report_files(tmp_path):
    rows = [
        runner.Row("eager", "op", "torch", 2.0, 1.0, 1.25, "<= 1.25x (#2)"),
        runner.Row("graph", "step", "jax.jit", 1.0, 2.0, 1.1, "<= 1.1x (#4)"),
        runner.Row("optim", "FAILED", error="boom"),
    ]
    png, md = tmp_path / "ratios.png", tmp_path / "BENCHMARKS.md"
    assert runner.save_plot(rows, str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from PIL import Image

    with Image.open(png) as im:
        im.verify()
    import datetime

    info = runner.machine_info()
    assert info["cores"] >= 1 and set(runner.DISTS) <= set(info["versions"])
    runner.write_markdown(
        str(md),
        rows,
        {"eager": "table"},
        info,
        "python -m benchmarks",
        False,
        str(png),
        datetime.datetime(2026, 1, 2, 3, 4),
        5.0,
    )
    text = md.read_text()
    assert "`python -m benchmarks`" in text and "2026-01-02 03:04" in text and info["cpu"] in text
    assert "1 of 2 targets met" in text and "1 benchmark(s) failed" in text
    assert "| eager | op | torch | 2.00 s | 1.00 s | 2.00x | <= 1.25x (#2) | NO |" in text
    assert "![ratios](ratios.png)" in text


def test_rerun_keeps_the_hand_written_sections(tmp_path):
    """write_markdown's claim: the level-2 sections after the modules' output survive a rerun, in order; a "## "
    line inside a module's output (a code block) is output, not a hand section; the generated part is replaced."""
    import datetime

    md = tmp_path / "BENCHMARKS.md"
    hand = "## Added by hand: one\n\ntext | with ``code``\n\n## Added by hand: two\n\n```\nx\n```\nend\n"
    md.write_text(
        "# Benchmarks\n\nold table\n\n## Each module's own output\n\n### eager\n\n```\n## not a heading\n```\n\n" + hand
    )
    args = ([runner.Row("eager", "op", "torch", 2.0, 1.0, 1.25, "<= 1.25x (#2)")], {"eager": "## printed\nrow"})
    for _ in range(2):  # twice: the kept text is not duplicated
        runner.write_markdown(
            str(md), *args, runner.machine_info(), "python -m benchmarks", False, None,
            datetime.datetime(2026, 1, 2, 3, 4), 5.0,
        )  # fmt: skip
        text = md.read_text()
        assert "old table" not in text and "## not a heading" not in text and "## printed" in text
        assert text.endswith(hand) and text.count("## Added by hand: one") == 1
    assert runner.hand_sections(str(tmp_path / "missing.md")) == ""


def test_script_entry_point():
    proc = subprocess.run(
        [sys.executable, os.path.join("benchmarks", "run.py"), "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and "--quick" in proc.stdout and "--only" in proc.stdout
    assert runner.parse_only("eager,graph:mlp_b1+small_cnn") == {"eager": None, "graph": ["mlp_b1", "small_cnn"]}
    with pytest.raises(SystemExit, match="unknown benchmark"):
        runner.parse_only("nope")
