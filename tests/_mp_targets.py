"""Functions run by lf/torch multiprocessing.spawn in tests/test_torch_namespaces_s7.py (importable by a spawned
child)."""

import os


def square_into(i, lib_name, out_dir):
    lib = __import__(lib_name)
    x = lib.arange(4, dtype=lib.float32) + i
    with open(os.path.join(out_dir, f"{i}.txt"), "w") as f:
        f.write(",".join(str(v) for v in (x * x).tolist()))


def raise_on_one(i):
    if i == 1:
        raise ValueError(f"rank {i} refuses")


def exit_on_one(i):
    if i == 1:
        os._exit(3)
