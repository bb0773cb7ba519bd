"""lf.utils.data: collate, samplers and datasets against torch.utils.data, and the DataLoader's workers.

torch is imported inside the tests that use it, so worker processes (which import this module to unpickle
the datasets below) start without it.
"""

import collections
import json
import os
import select
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import lazyflow as lf
from lazyflow.utils.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    default_collate,
    default_convert,
    get_worker_info,
    random_split,
)

Point = collections.namedtuple("Point", "x y")


# ---------------------------------------------------------------- datasets used by worker processes
class Squares(Dataset):
    """Sample i: a dict with an array derived from i, the index, and the worker that made it."""

    def __init__(self, n, shape=(3, 4)):
        self.n, self.shape = n, shape

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        info = get_worker_info()
        return {
            "x": np.full(self.shape, i * i, np.float32),
            "i": i,
            "worker": -1 if info is None else info.id,
            "pid": os.getpid(),
            "rand": float(np.random.random()),
            "init": _INIT_MARK[0],
        }


class Failing(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 5:
            raise ValueError(f"sample {i} is corrupt")
        return np.float32(i)


class Dying(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 3:
            os._exit(7)
        return np.float32(i)


class Slow(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        time.sleep(3.0)
        return np.float32(i)


class Ragged(Dataset):
    """Batches of varying byte size: exercises growing shared-memory slots and in-band fallbacks."""

    def __len__(self):
        return 12

    def __getitem__(self, i):
        return np.arange((i % 5 + 1) * 1000, dtype=np.float64) + i, f"s{i}"


class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        for i in range(start, self.n, step):
            yield np.int64(i)


_INIT_MARK = [0]


def _names(batch):
    return [s for _, s in batch]


def _init(worker_id):
    _INIT_MARK[0] = 100 + worker_id


def _shm_names():
    return {f for f in os.listdir("/dev/shm") if f.startswith("psm_")} if os.path.isdir("/dev/shm") else set()


def _np(tree):
    """lazyflow/torch tensors -> numpy, containers -> (type name, children)."""
    if hasattr(tree, "numpy") and not isinstance(tree, np.ndarray):
        a = tree.detach().numpy() if hasattr(tree, "detach") and not isinstance(tree, lf.Tensor) else tree.numpy()
        return ("array", str(a.dtype), a.tolist())
    if isinstance(tree, dict):
        return ("dict", {k: _np(v) for k, v in tree.items()})
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return (type(tree).__name__, [_np(v) for v in tree])
    if isinstance(tree, (list, tuple)):
        return (type(tree).__name__, [_np(v) for v in tree])
    return ("leaf", tree)


# ---------------------------------------------------------------- collate
COLLATE_CASES = [
    [(np.zeros((2, 3), np.float32), 1, "a"), (np.ones((2, 3), np.float32), 2, "b")],
    [{"x": 1.5, "y": [np.int32(1), True]}, {"x": 2.5, "y": [np.int32(2), False]}],
    [Point(np.arange(3, dtype=np.int16), 0.5), Point(np.arange(3, 6, dtype=np.int16), 1.5)],
    [[np.uint8(3), np.float64(1.0)], [np.uint8(4), np.float64(2.0)]],
    [np.array([1.0, 2.0]), np.array([3.0, 4.0])],
    [{"nested": {"a": (np.float32(1), "t")}}, {"nested": {"a": (np.float32(2), "u")}}],
]


@pytest.mark.parametrize("batch", COLLATE_CASES)
def test_default_collate_matches_torch(batch):
    from torch.utils.data import default_collate as torch_collate

    assert _np(default_collate(batch)) == _np(torch_collate(batch))


@pytest.mark.parametrize(
    "sample",
    [
        {"a": np.arange(3), "b": (np.float32(2.0), "s")},
        [np.zeros(2), 3],
        np.arange(4.0),
        "text",
        7,
    ],
)
def test_default_convert_matches_torch(sample):
    from torch.utils.data import default_convert as torch_convert

    assert _np(default_convert(sample)) == _np(torch_convert(sample))


def test_default_collate_stacks_lazyflow_tensors():
    out = default_collate([lf.tensor([1.0, 2.0]), lf.tensor([3.0, 4.0])])
    assert isinstance(out, lf.Tensor)
    np.testing.assert_array_equal(out.numpy(), [[1.0, 2.0], [3.0, 4.0]])


def test_default_collate_errors():
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="found object"):
        default_collate([np.array([object()]), np.array([object()])])
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([np.zeros(2), np.zeros(3)])
    with pytest.raises(TypeError, match="found <class 'object'>"):
        default_collate([object(), object()])


def test_collated_arrays_are_private_copies():
    src = [np.zeros(4, np.float32), np.ones(4, np.float32)]
    out = default_collate(src)
    src[0][:] = 7
    np.testing.assert_array_equal(out.numpy()[0], np.zeros(4))


# ---------------------------------------------------------------- samplers and datasets
def test_batch_sampler_matches_torch():
    import torch.utils.data as tud

    for drop_last in (False, True):
        mine = BatchSampler(SequentialSampler(range(10)), 3, drop_last)
        theirs = tud.BatchSampler(tud.SequentialSampler(range(10)), 3, drop_last)
        assert list(mine) == list(theirs) and len(mine) == len(theirs)
    with pytest.raises(ValueError, match="batch_size should be a positive integer"):
        BatchSampler(range(3), 0, False)
    with pytest.raises(ValueError, match="drop_last should be a boolean"):
        BatchSampler(range(3), 2, 1)


def test_random_sampler():
    data = range(50)
    a = list(RandomSampler(data, generator=lf.Generator().manual_seed(3)))
    b = list(RandomSampler(data, generator=lf.Generator().manual_seed(3)))
    assert a == b and sorted(a) == list(range(50)) and a != list(range(50))
    s = RandomSampler(data, generator=lf.Generator().manual_seed(3))
    assert list(s) != list(s)  # each epoch draws a new permutation
    lf.manual_seed(11)
    c = list(RandomSampler(data))
    lf.manual_seed(11)
    assert list(RandomSampler(data)) == c  # the global generator drives the default
    over = list(RandomSampler(range(4), num_samples=10))
    assert len(over) == 10 and sorted(over[:8]) == [0, 0, 1, 1, 2, 2, 3, 3]
    rep = list(RandomSampler(range(3), replacement=True, num_samples=300))
    assert len(rep) == 300 and set(rep) == {0, 1, 2}
    sub = list(SubsetRandomSampler([10, 20, 30, 40]))
    assert sorted(sub) == [10, 20, 30, 40]
    w = list(WeightedRandomSampler([0.0, 1.0, 3.0], 4000, generator=np.random.default_rng(0)))
    assert 0 not in w and 0.70 < w.count(2) / 4000 < 0.80
    with pytest.raises(ValueError, match="num_samples"):
        RandomSampler(data, num_samples=0)
    with pytest.raises(TypeError, match="generator must be"):
        list(RandomSampler(data, generator=42))


def test_random_split_like_torch():
    import torch.utils.data as tud

    for n, lengths in [(10, [0.3, 0.3, 0.4]), (11, [0.5, 0.5]), (7, [0.1, 0.2, 0.7]), (9, [2, 7])]:
        mine = random_split(range(n), lengths, generator=lf.Generator().manual_seed(0))
        theirs = tud.random_split(range(n), lengths)
        assert [len(s) for s in mine] == [len(s) for s in theirs]
        assert sorted(i for s in mine for i in s) == list(range(n))
    a = [list(s) for s in random_split(range(20), [5, 15], generator=lf.Generator().manual_seed(1))]
    b = [list(s) for s in random_split(range(20), [5, 15], generator=lf.Generator().manual_seed(1))]
    assert a == b
    with pytest.raises(ValueError, match="does not equal the length"):
        random_split(range(5), [2, 2])


def test_datasets():
    x, y = lf.randn(6, 2), lf.arange(6)
    ds = TensorDataset(x, y)
    assert len(ds) == 6
    np.testing.assert_array_equal(ds[4][0].numpy(), x.numpy()[4])
    batch = ds.__getitems__([5, 1])
    assert len(batch) == 2 and batch[1][1].item() == 1
    np.testing.assert_array_equal(default_collate(batch)[0].numpy(), x.numpy()[[5, 1]])
    with pytest.raises(lf.ShapeError, match="Size mismatch"):
        TensorDataset(lf.zeros(3), lf.zeros(4))
    sub = Subset(ds, [3, 0])
    assert len(sub) == 2 and sub[0][1].item() == 3
    cat = ConcatDataset([range(3), range(10, 12)])
    assert len(cat) == 5 and [cat[i] for i in range(5)] == [0, 1, 2, 10, 11] and cat[-1] == 11
    with pytest.raises(ValueError, match="empty"):
        ConcatDataset([])


# ---------------------------------------------------------------- DataLoader, main process
def test_loader_single_process_matches_torch():
    import torch.utils.data as tud

    ds = Squares(10)
    for kwargs in [
        dict(batch_size=4),
        dict(batch_size=4, drop_last=True),
        dict(batch_size=None),
        dict(batch_sampler=[[3, 1], [0, 2, 4]]),
        dict(batch_size=3, collate_fn=lambda b: len(b)),
    ]:
        mine = [_np(_strip(b)) for b in DataLoader(ds, **kwargs)]
        theirs = [_np(_strip(b)) for b in tud.DataLoader(ds, **kwargs)]
        assert mine == theirs, kwargs
        assert len(DataLoader(ds, **kwargs)) == len(tud.DataLoader(ds, **kwargs))


def _strip(batch):
    if isinstance(batch, dict):
        return {k: v for k, v in batch.items() if k not in ("pid", "rand")}
    return batch


def test_loader_shuffle_is_seeded():
    ds = Squares(20)
    order = lambda seed: [
        b["i"].tolist() for b in DataLoader(ds, batch_size=5, shuffle=True, generator=lf.Generator().manual_seed(seed))
    ]
    a = order(0)
    assert a == order(0) and a != order(1) and sorted(sum(a, [])) == list(range(20))


def test_tensor_dataset_loader():
    x, y = lf.randn(10, 3), lf.arange(10)
    batches = list(DataLoader(TensorDataset(x, y), batch_size=4))
    assert [b[1].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    np.testing.assert_array_equal(batches[2][0].numpy(), x.numpy()[8:])


def test_iterable_dataset_single_process():
    assert [b.tolist() for b in DataLoader(Stream(7), batch_size=3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [b.tolist() for b in DataLoader(Stream(7), batch_size=3, drop_last=True)] == [[0, 1, 2], [3, 4, 5]]


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(num_workers=-1), "num_workers option should be non-negative"),
        (dict(timeout=-1), "timeout option should be non-negative"),
        (dict(prefetch_factor=2), "prefetch_factor option could only be specified"),
        (dict(persistent_workers=True), "persistent_workers option needs num_workers > 0"),
        (dict(shuffle=True, sampler=SequentialSampler(range(4))), "mutually exclusive with shuffle"),
        (dict(batch_sampler=[[0]], batch_size=2), "batch_sampler option is mutually exclusive"),
        (dict(batch_size=None, drop_last=True), "disables auto-batching"),
    ],
)
def test_loader_invalid_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DataLoader(Squares(4), **kwargs)


def test_iterable_dataset_rejects_shuffle():
    with pytest.raises(ValueError, match="expected unspecified shuffle option"):
        DataLoader(Stream(3), shuffle=True)


# ---------------------------------------------------------------- DataLoader, worker processes
def test_workers_keep_order_seed_and_init():
    ds = Squares(23, shape=(64, 64))
    ref = [b["i"].tolist() for b in DataLoader(ds, batch_size=4)]
    loader = DataLoader(
        ds,
        batch_size=4,
        num_workers=2,
        worker_init_fn=_init,
        generator=lf.Generator().manual_seed(5),
        persistent_workers=True,
    )
    epochs = [list(loader) for _ in range(2)]
    for batches in epochs:
        assert [b["i"].tolist() for b in batches] == ref
        for b in batches:  # arrays travelled through shared memory intact
            np.testing.assert_array_equal(
                b["x"].numpy(), (b["i"].numpy() ** 2)[:, None, None] * np.ones((1, 64, 64), np.float32)
            )
            assert b["x"].dtype is lf.float32 and b["i"].dtype is lf.int64
    first = epochs[0]
    assert [b["worker"].tolist() for b in first[:2]] == [[0] * 4, [1] * 4]  # round robin
    assert all(b["init"].tolist() == [100 + w for w in b["worker"].tolist()] for b in first)
    assert {b["pid"][0].item() for b in epochs[0]} == {b["pid"][0].item() for b in epochs[1]}  # persistent
    rand = [b["rand"].tolist() for b in first]
    again = list(DataLoader(ds, batch_size=4, num_workers=2, generator=lf.Generator().manual_seed(5)))
    assert [b["rand"].tolist() for b in again] == rand  # worker seeds follow the generator
    assert rand[0] != rand[1]  # and differ between workers
    it = iter(loader)  # break off an epoch: the next one must not see its leftovers
    next(it)
    del it
    assert [b["i"].tolist() for b in loader] == ref
    pids = {b["pid"][0].item() for b in epochs[0]}
    slots = {shm.name.lstrip("/") for shm in loader._iterator._maps.values()}
    assert slots  # batches did travel through shared memory
    del loader
    time.sleep(0.2)
    assert all(not _alive(p) for p in pids)
    assert not slots & _shm_names()  # the workers unlinked their segments


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is as good as gone
        return f.read().split()[2] != "Z"


def test_worker_error_is_reraised_with_traceback():
    with pytest.raises(ValueError) as info:
        list(DataLoader(Failing(), batch_size=2, num_workers=2))
    msg = str(info.value)
    assert "Caught ValueError in DataLoader worker process 0" in msg
    assert "sample 5 is corrupt" in msg and "Traceback" in msg and "__getitem__" in msg


def test_worker_death_is_reported():
    with pytest.raises(RuntimeError, match=r"exit code 7\) exited unexpectedly"):
        list(DataLoader(Dying(), batch_size=2, num_workers=2))


def test_timeout():
    with pytest.raises(RuntimeError, match="timed out after 0.5 seconds"):
        list(DataLoader(Slow(), batch_size=1, num_workers=1, timeout=0.5))


def test_early_break_stops_workers():
    loader = DataLoader(Squares(40), batch_size=2, num_workers=2)
    pids = set()
    for b in loader:
        pids.add(b["pid"][0].item())
        break
    time.sleep(0.2)
    assert pids and all(not _alive(p) for p in pids)


def test_ragged_batches_custom_collate_and_iterable_workers():
    got = list(DataLoader(Ragged(), batch_size=1, num_workers=2))
    for i, (arr, name) in enumerate(got):
        np.testing.assert_array_equal(arr.numpy()[0], np.arange((i % 5 + 1) * 1000) + i)
        assert name == [f"s{i}"]
    custom = list(DataLoader(Ragged(), batch_size=3, num_workers=1, collate_fn=_names))
    assert custom == [["s0", "s1", "s2"], ["s3", "s4", "s5"], ["s6", "s7", "s8"], ["s9", "s10", "s11"]]
    stream = DataLoader(Stream(11), batch_size=2, num_workers=2)
    values = sorted(v for b in stream for v in b.tolist())
    assert values == list(range(11))


def test_lazyflow_tensors_in_workers():
    x = lf.arange(12, dtype=lf.float32).reshape(6, 2)
    ds = TensorDataset(x, lf.arange(6))
    batches = list(DataLoader(ds, batch_size=4, num_workers=1, shuffle=True, generator=lf.Generator().manual_seed(0)))
    seen = sum((b[1].tolist() for b in batches), [])
    assert sorted(seen) == list(range(6))
    for xb, yb in batches:
        np.testing.assert_array_equal(xb.numpy(), x.numpy()[yb.numpy()])


# ---------------------------------------------------------------- workers outlive no killed main process
_ORPHAN_SCRIPT = """
import json, os, sys, time
import numpy as np


class Cells:
    \"\"\"Sample i: a 256 KiB array (batches travel through shared-memory slots) and the worker's pid.\"\"\"

    def __init__(self, n, delay):
        self.n, self.delay = n, delay

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.delay)
        return np.full((256, 256), i, np.float32), os.getpid()


if __name__ == "__main__":
    from lazyflow.utils.data import DataLoader

    idle = DataLoader(Cells(16, 0.0), batch_size=4, num_workers=2, persistent_workers=True)
    pids = {int(p[0]) for _, p in idle}  # a whole epoch: these persistent workers now wait for the next one
    busy = iter(DataLoader(Cells(100000, 0.02), batch_size=4, num_workers=2))
    for _ in range(4):  # mid-epoch: batches in flight, workers fetching
        pids.add(int(next(busy)[1][0]))
    print(json.dumps({"main": os.getpid(), "workers": sorted(pids)}), flush=True)
    time.sleep(300)
"""


def _shm_held(pid):
    """Names of the /dev/shm objects (shared-memory slots, semaphores) process ``pid`` maps or holds open."""
    names = set()
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            path = line.split(None, 5)[5].strip() if len(line.split(None, 5)) == 6 else ""
            if path.startswith("/dev/shm/"):
                names.add(path[len("/dev/shm/") :].removesuffix(" (deleted)"))
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/dev/shm/"):
            names.add(target[len("/dev/shm/") :].removesuffix(" (deleted)"))
    return names


def _ppid(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("PPid:")).split()[1])


@pytest.mark.skipif(not os.path.isdir("/proc") or not os.path.isdir("/dev/shm"), reason="needs /proc and /dev/shm")
def test_workers_exit_when_the_main_process_is_killed(tmp_path):
    """SIGKILL the training process (the OOM killer does): its workers -- persistent ones waiting between epochs
    and busy ones mid-epoch -- and the fork server that started them must be gone within 5 s, and no shared-memory
    slot or semaphore they held may remain in /dev/shm (torch's workers take up to 5 s: they poll every 5 s)."""
    script = tmp_path / "orphan.py"
    script.write_text(_ORPHAN_SCRIPT)
    root = os.path.dirname(os.path.dirname(os.path.abspath(lf.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    workers, servers = [], set()
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        line = proc.stdout.readline() if ready else ""
        assert line, f"the script reported no workers: {proc.poll()=}"
        report = json.loads(line)
        main, workers = report["main"], report["workers"]
        assert len(workers) == 4 and main not in workers
        held = set().union(*(_shm_held(p) for p in workers))
        assert any(n.startswith("psm_") for n in held)  # batches did travel through shared-memory slots
        assert any(n.startswith("sem.") for n in held)  # and the queues' semaphores are named objects here
        servers = {_ppid(p) for p in workers} - {main}  # the fork server (none under fork/spawn)
        t0 = time.monotonic()
        os.kill(main, signal.SIGKILL)
        proc.wait(10)
        gone_at = None
        while time.monotonic() - t0 < 10:
            if gone_at is None and not any(_alive(p) for p in (*workers, *servers)):
                gone_at = time.monotonic() - t0
            if gone_at is not None and not held & set(os.listdir("/dev/shm")):
                break
            time.sleep(0.05)
        released_at = time.monotonic() - t0
        print(f"workers gone {gone_at} s after SIGKILL; their /dev/shm objects released after {released_at:.2f} s")
        assert gone_at is not None and gone_at < 5.0, [p for p in (*workers, *servers) if _alive(p)]
        left = held & set(os.listdir("/dev/shm"))
        assert not left and released_at < 5.0, f"left in /dev/shm: {sorted(left)}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for p in (*workers, *servers):  # a failed run must not leave them behind
            if _alive(p):
                os.kill(p, signal.SIGKILL)
        proc.stdout.close()
        proc.stderr.close()


_UNGUARDED = """
import numpy as np
import lazyflow as lf
from lazyflow.utils.data import DataLoader, Dataset
from lazyflow.utils.data.dataloader import _context


class Squares(Dataset):  # defined in the script: a forkserver worker would have to import (= run) the script
    def __len__(self):
        return 40

    def __getitem__(self, i):
        return np.float32(i * i)


total = 0.0
for batch in DataLoader(Squares(), batch_size=8, num_workers=2):
    total += float(batch.sum())
print("RESULT", total, _context(None).get_start_method(), flush=True)
"""


@pytest.mark.parametrize("guarded", [False, True])
def test_workers_in_a_script_with_or_without_a_main_guard(tmp_path, guarded):
    # torch's Linux default (fork) lets a script without `if __name__ == "__main__":` use workers; lazyflow never
    # forks a JAX process by default (forkserver): an unguarded script's workers rebuild only its definitions, so
    # its top level (the loop, the print) runs once
    body = _UNGUARDED
    if guarded:
        body = body.replace("\ntotal = 0.0\n", '\nif __name__ == "__main__":\n    total = 0.0\n')
        body = body.replace("\nfor batch in", "\n    for batch in").replace("\n    total += ", "\n        total += ")
        body = body.replace('\nprint("RESULT"', '\n    print("RESULT"')
    script = tmp_path / "train.py"
    script.write_text(body)
    root = os.path.dirname(os.path.dirname(os.path.abspath(lf.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT")]
    assert len(lines) == 1, proc.stdout
    _, total, method = lines[0].split()
    assert float(total) == float(sum(i * i for i in range(40)))
    assert method == "forkserver"
