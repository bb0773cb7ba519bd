"""``python -m benchmarks [--quick] [--only NAME,...] [--no-write]``: the whole suite (see benchmarks/run.py)."""

from benchmarks.run import main

if __name__ == "__main__":
    raise SystemExit(main())
