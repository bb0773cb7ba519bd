"""The eager op-signature cache, by counting: hits, misses, traces, evictions, backward compiles and bytes.

Traces are counted by an impl that increments a counter each time JAX traces it (a test-local OpDef, or a
registered op's impl wrapped for the duration of a test): a hit must not trace, a miss traces once. Released
executables are counted with the client's own list of live executables (``live_executables()``), not with
lazyflow's bookkeeping.
"""

import collections
import gc
import itertools
import os
import subprocess
import sys
import threading
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lazyflow as lf
import lazyflow.eager.cache as cache_mod
import lazyflow.eager.kernel_store as kernel_store
from lazyflow.ops.table import REGISTRY, OpDef

INTERP = lf.eager.INTERPRETER


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    # the in-memory cache alone: a kernel loaded from lazyflow's on-disk store (tests/test_kernel_store.py) is a
    # jax.stages.Compiled, not the jax.jit wrapper these tests inspect, and its size comes from the stored entry
    monkeypatch.setattr(kernel_store, "ENABLED", False)
    limit, maxbytes = lf.eager.get_cache_limit(), lf.eager.cache_info().maxbytes
    lf.eager.clear_cache()
    yield
    lf.eager.set_cache_limit(limit, bytes=maxbytes)
    lf.eager.clear_cache()


def _np_tensor(*shape, dtype=np.float32):
    """A tensor made without any eager op (so creating it adds no cache entry)."""
    return lf.tensor((np.arange(np.prod(shape)) % (2 if dtype is np.bool_ else 97)).astype(dtype).reshape(shape))


class Counting:
    """A test-local op ``x * 2 + c`` whose impl counts how often JAX traces it."""

    def __init__(self, dtypes="promote"):
        self.traces = 0

        def impl(x, c=0.0):
            self.traces += 1
            return x * 2 + c

        self.op = OpDef("counting_test_op", impl, dtypes=dtypes)

    def __call__(self, *args):
        return INTERP.apply(self.op, args, ())


@pytest.fixture
def traced(monkeypatch):
    """``traced("setitem")`` wraps a registered op's impl to count its traces; returns the counter dict."""
    counts = collections.Counter()

    def wrap(name):
        op = REGISTRY[name]
        orig = op.impl

        def impl(*a, **k):
            counts[name] += 1
            return orig(*a, **k)

        monkeypatch.setattr(op, "impl", impl)
        return counts

    return wrap


def _info():
    return lf.eager.cache_info()


# --------------------------------------------------------------------------- hits and misses


def test_cache_info_fields_and_clear_cache():
    info = _info()
    # new fields only ever go at the end: positional users keep working
    assert info._fields == (
        "hits",
        "misses",
        "evictions",
        "currsize",
        "maxsize",
        "backward_compiles",
        "currbytes",
        "maxbytes",
    )
    assert info.hits == info.misses == info.evictions == info.currsize == info.currbytes == 0
    lf.neg(_np_tensor(3))
    assert _info().currsize == 1 and _info().misses == 1
    assert _info().currbytes > 0
    lf.eager.clear_cache()
    info = _info()
    assert info.currsize == 0 and info.hits == 0 and info.misses == 0 and len(cache_mod.entries) == 0
    assert info.currbytes == 0


def test_hit_count_is_exact_across_reads_inserts_inplace_hits_and_clears():
    # the hit count is derived from the recency counter (stamps issued minus those no hit took): reading it,
    # inserting entries, in-place and out-of-place hits, and clearing must each count exactly as before
    x, y = _np_tensor(4), _np_tensor(4)
    lf.neg(x)
    assert [_info().hits for _ in range(3)] == [0, 0, 0]
    lf.neg(x), lf.neg(y), x + y  # two hits, one insert
    x.add_(1.0), x.add_(1.0)  # an in-place insert, then an in-place hit
    lf.relu(x)[0]  # a miss (relu) and a getitem miss
    assert (_info().hits, _info().misses) == (3, 5)
    lf.eager.clear_cache()
    assert _info().hits == 0
    lf.neg(x), lf.neg(x)
    assert [_info().hits for _ in range(2)] == [1, 1]


def test_repeated_call_is_one_miss_then_hits_without_a_trace():
    f = Counting()
    x = _np_tensor(2)
    f(x)
    assert (_info().misses, _info().hits, f.traces) == (1, 0, 1)
    out = f(x)
    assert (_info().misses, _info().hits, f.traces) == (1, 1, 1)
    np.testing.assert_array_equal(out.numpy(), [0.0, 2.0])
    f(_np_tensor(2))  # a different tensor of the same signature
    assert (_info().misses, _info().hits, f.traces) == (1, 2, 1)


def test_public_function_repeated_is_a_hit():
    def f(x):
        return lf.exp(x) * 2.0

    f(lf.zeros(2))
    first = _info()
    assert first.hits == 0 and first.misses == 2  # exp, mul (zeros is built on the host: no kernel)
    f(lf.zeros(2))
    second = _info()
    assert second.misses == first.misses and second.hits == first.misses and second.currsize == 2


def test_new_shape_or_dtype_is_a_miss():
    f = Counting()
    signatures = [
        _np_tensor(2),
        _np_tensor(3),
        _np_tensor(2, 1),
        _np_tensor(2, dtype=np.float64),
        _np_tensor(2, dtype=np.int32),
        _np_tensor(2, dtype=np.int64),
    ]
    for i, x in enumerate(signatures, 1):
        f(x)
        assert _info().misses == i and f.traces == i
    for x in signatures:
        f(x)
    assert _info().misses == len(signatures) and _info().hits == len(signatures) and f.traces == len(signatures)


def test_python_scalar_value_is_not_in_the_key():
    f = Counting()
    x = _np_tensor(3)
    for c in (2.0, 3.0, -1.5, 1e3):
        np.testing.assert_array_equal(f(x, c).numpy(), np.arange(3) * 2 + c)
    assert f.traces == 1 and _info().misses == 1 and _info().hits == 3
    f(x, 2)  # the scalar's type is in the key: an int is a different signature
    assert f.traces == 2


def test_add_scalar_values_share_one_entry():
    x = _np_tensor(4)
    a = x + 2.0
    b = x + 3.0
    assert _info().currsize == 1 and _info().misses == 1 and _info().hits == 1
    np.testing.assert_array_equal(a.numpy(), np.arange(4) + 2.0)
    np.testing.assert_array_equal(b.numpy(), np.arange(4) + 3.0)
    (key,) = cache_mod.entries
    assert float in key and 2.0 not in key[1:] and 3.0 not in key[1:]


def test_setitem_int_loop_uses_one_entry(traced):
    counts = traced("setitem")
    n = 64
    v = _np_tensor(n, 3) * 0.0
    ones = lf.ones(3)
    lf.eager.clear_cache()
    for i in range(n):
        v[i] = ones
    assert _info().currsize == 1 and _info().misses == 1 and _info().hits == n - 1
    assert counts["setitem"] == 1
    np.testing.assert_array_equal(v.numpy(), np.ones((n, 3)))
    for i in range(n):  # negative positions normalise to the same entry; scalar values too
        v[-i - 1] = float(i)
    assert counts["setitem"] == 2 and _info().currsize == 2
    np.testing.assert_array_equal(v.numpy()[:, 0], np.arange(n)[::-1])


def test_setitem_slice_loop_uses_one_entry(traced):
    counts = traced("setitem")
    n = 40
    v = lf.zeros(n, 2)
    vals = [lf.full((2, 2), float(i)) for i in range(n - 1)]
    lf.eager.clear_cache()
    for i in range(n - 1):
        v[i : i + 2] = vals[i]
    assert _info().currsize == 1 and counts["setitem"] == 1 and _info().hits == n - 2
    expected = np.zeros((n, 2))
    for i in range(n - 1):
        expected[i : i + 2] = i
    np.testing.assert_array_equal(v.numpy(), expected)


def test_setitem_two_int_positions_use_one_entry():
    m = lf.zeros(5, 6)
    lf.eager.clear_cache()
    for i, j in itertools.product(range(5), range(6)):
        m[i, j] = float(i * 6 + j)
    assert _info().currsize == 1 and _info().misses == 1
    np.testing.assert_array_equal(m.numpy(), np.arange(30).reshape(5, 6))


def test_getitem_int_and_slice_loops_use_one_entry_each(traced):
    counts = traced("getitem")
    v = _np_tensor(20, 3)
    rows = [v[i] for i in range(20)]
    windows = [v[i : i + 4] for i in range(16)]
    assert counts["getitem"] == 2 and _info().currsize == 2
    np.testing.assert_array_equal(rows[7].numpy(), np.arange(60).reshape(20, 3)[7])
    np.testing.assert_array_equal(windows[9].numpy(), np.arange(60).reshape(20, 3)[9:13])


def test_statics_are_in_the_key():
    x = _np_tensor(2, 3)
    x.sum(dim=0)
    x.sum(dim=1)
    x.sum(dim=0, keepdim=True)
    x.sum()
    assert _info().misses == 4 and _info().currsize == 4
    r = x.sum(dim=1)
    assert _info().misses == 4 and _info().hits == 1
    np.testing.assert_array_equal(r.numpy(), np.arange(6).reshape(2, 3).sum(1))
    x.roll(1, 1)
    x.roll(2, 1)
    x.roll(1, 1)
    x.roll(1, 0)
    assert sum(k[0] is REGISTRY["roll"] for k in cache_mod.entries) == 3


def test_default_dtype_is_part_of_the_signature():
    """A global that changes the result (the default float dtype: int -> float promotion) must select a
    different kernel, never a stale one."""
    i = lf.tensor(np.arange(3, dtype=np.int64))
    assert lf.exp(i).dtype is lf.float32 and (i * 1.5).dtype is lf.float32 and (i / 2).dtype is lf.float32
    lf.set_default_dtype(lf.float64)
    try:
        e, m, d = lf.exp(i), i * 1.5, i / 2
    finally:
        lf.set_default_dtype(lf.float32)
    assert e.dtype is lf.float64 and m.dtype is lf.float64 and d.dtype is lf.float64
    np.testing.assert_allclose(e.numpy(), np.exp(np.arange(3.0)), rtol=1e-15)
    assert lf.exp(i).dtype is lf.float32


def test_default_dtype_and_the_cache_agree_across_threads():
    """Whatever scope the default dtype has (lazyflow keeps it per thread), an op's result in a thread follows
    ``lf.get_default_dtype()`` as seen by that thread, even while another thread uses a different default."""
    i = lf.tensor(np.arange(3, dtype=np.int64))
    seen = {}
    set_in_worker, main_done = threading.Event(), threading.Event()

    def worker():
        lf.set_default_dtype(lf.float64)
        try:
            seen["worker before"] = (lf.exp(i).dtype, lf.get_default_dtype())
            set_in_worker.set()
            main_done.wait(30)
            seen["worker after"] = (lf.exp(i).dtype, lf.get_default_dtype())
        finally:
            lf.set_default_dtype(lf.float32)

    th = threading.Thread(target=worker)
    th.start()
    try:
        assert set_in_worker.wait(30)
        seen["main"] = (lf.exp(i).dtype, lf.get_default_dtype())
    finally:
        main_done.set()
        th.join(30)
    lf.set_default_dtype(lf.float32)
    for where, (got, default) in seen.items():
        assert got is default, f"{where}: exp(int) gave {got} while the default dtype is {default}"
    assert len(seen) == 3


# --------------------------------------------------------------------------- key form and hash dispersion


def _real_key_families():
    """Run structured families of ops so the cache holds their real keys."""
    for n in range(1, 17):  # sequential shapes
        lf.neg(_np_tensor(n))
    for i, j in itertools.product(range(1, 5), range(1, 5)):
        lf.neg(_np_tensor(i, j))
    for shape in itertools.permutations((2, 3, 4)):  # permuted dims
        _np_tensor(*shape).sum(dim=0)
    x = _np_tensor(2, 3, 4)
    for p in list(itertools.permutations(range(3)))[1:]:  # the identity permutation runs no op
        x.permute(*p)
    for dt in (np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.bool_):
        _np_tensor(2, 3, dtype=dt).reshape(6)  # every dtype
    _np_tensor(2, 3).bfloat16().reshape(6)
    for k in range(1, 17):  # many attribute values
        x.roll(k, 2)
    for d, kd in itertools.product((0, 1, 2, (0, 1), (1, 2), (0, 2)), (False, True)):
        x.sum(dim=d, keepdim=kd)


def test_keys_are_plain_tuples_with_distinct_well_spread_hashes():
    _real_key_families()
    keys = list(cache_mod.entries)
    assert len(keys) == _info().currsize >= 75
    for k in keys:
        assert type(k) is tuple, f"cache keys must be plain tuples, got {type(k)}"
        hash(k)
    hashes = [hash(k) for k in keys]
    assert len(set(hashes)) == len(hashes), "two different signatures share a hash"
    assert len({h % 4096 for h in hashes}) >= 0.9 * len(hashes)
    # permuted dims and permuted statics must not collide (an XOR/sum combiner would make them equal)
    perm_keys = [k for k in keys if k[0] is REGISTRY["permute"]]
    assert len(perm_keys) == 5 and len({hash(k) for k in perm_keys}) == 5


def _template(op_name):
    (key,) = [k for k in cache_mod.entries if k[0] is REGISTRY[op_name]][:1]
    return key


def test_structured_key_families_disperse_over_buckets():
    """Families built the way the cache builds keys (the real OpDef, DType and placement objects, with
    shapes/dims/statics varied) spread evenly over 1024 buckets."""
    lf.neg(_np_tensor(1))
    _np_tensor(2, 3).sum(dim=0)
    op_neg, _, (_, dt, pid) = _template("neg")
    op_sum = _template("sum")[0]
    dtypes = [lf.float16, lf.bfloat16, lf.float32, lf.float64, lf.int8, lf.int16, lf.int32, lf.int64, lf.uint8, lf.bool]
    keys = set()
    keys.update((op_neg, (), ((n,), dt, pid)) for n in range(1, 4097))  # sequential shapes
    keys.update((op_neg, (), ((i, j), dt, pid)) for i in range(1, 65) for j in range(1, 65))
    keys.update((op_neg, (), (p, dt, pid)) for p in itertools.permutations((1, 2, 3, 4, 5, 6, 7)))  # permuted
    keys.update((op_neg, (), ((n, 8), d, pid)) for n in range(1, 257) for d in dtypes)  # all dtypes
    keys.update((op_sum, ((d,), kd, None), ((4, 5, 6, 7), dt, pid)) for d in range(4) for kd in (False, True))
    keys.update(
        (op_sum, ((a, b), False, None), ((n, 5, 6), dt, pid))  # many attribute values
        for a, b in itertools.permutations(range(3), 2)
        for n in range(1, 300)
    )
    keys.update((op_neg, (), ((n,), dt, pid), float, "donate") for n in range(1, 1025))
    n = len(keys)
    assert n > 15000
    hashes = [hash(k) for k in keys]
    assert len(set(hashes)) == n
    buckets = collections.Counter(h % 1024 for h in hashes)
    expected = n / 1024
    assert len(buckets) == 1024, "some buckets are never used"
    assert max(buckets.values()) <= 2.5 * expected, (max(buckets.values()), expected)
    # and the dtype singletons and op records hash apart
    assert len({hash(d) for d in dtypes}) == len(dtypes)
    assert len({hash(o) for o in REGISTRY.values()}) == len(REGISTRY)


# --------------------------------------------------------------------------- bounded LRU


def _present(f):
    return sorted(k[2][0][0] for k in cache_mod.entries if k[0] is f.op)


def test_lru_evicts_the_least_recently_used_one_at_a_time():
    f = Counting()
    xs = {n: _np_tensor(n) for n in range(1, 30)}
    lf.eager.set_cache_limit(3)
    assert lf.eager.get_cache_limit() == 3 and _info().maxsize == 3
    f(xs[1])
    f(xs[2])
    f(xs[3])
    f(xs[1])  # hit: 1 is now the most recently used
    assert _info().evictions == 0 and f.traces == 3
    f(xs[4])  # miss: evicts 2, the least recently used
    assert _info().evictions == 1 and _info().currsize == 3 and _present(f) == [1, 3, 4]
    f(xs[1])
    f(xs[3])
    assert f.traces == 4  # both survived: hits, no trace
    f(xs[2])  # 4 is now the least recently used
    assert _present(f) == [1, 2, 3] and _info().evictions == 2 and f.traces == 5
    for n in range(5, 30):  # never clear-all: every miss past the limit evicts exactly one entry
        before = _info()
        f(xs[n])
        after = _info()
        assert after.evictions == before.evictions + 1 and after.currsize == 3
    assert _present(f) == [27, 28, 29]


def test_lru_recently_hit_entry_survives_a_stream_of_misses():
    f = Counting()
    keep = _np_tensor(100)
    xs = [_np_tensor(n) for n in range(1, 21)]
    lf.eager.set_cache_limit(4)
    f(keep)
    for x in xs:
        f(x)
        f(keep)  # kept hot
    assert 100 in _present(f) and f.traces == 1 + len(xs)
    assert _info().evictions == len(xs) + 1 - 4


def test_shrinking_the_limit_evicts_down_to_the_most_recent_and_growing_evicts_nothing():
    f = Counting()
    xs = {n: _np_tensor(n) for n in range(1, 7)}
    lf.eager.set_cache_limit(10)
    for n in range(1, 7):
        f(xs[n])
    for n in (5, 2, 6, 1, 3, 4):  # recency order, most recent last
        f(xs[n])
    lf.eager.set_cache_limit(2)
    assert _info().evictions == 4 and _info().currsize == 2 and _present(f) == [3, 4]
    lf.eager.set_cache_limit(50)
    assert _info().evictions == 4 and _info().currsize == 2
    traces = f.traces
    f(xs[3])
    f(xs[4])
    assert f.traces == traces


@pytest.mark.parametrize("bad", [0, -1, 2.5, "8", None, True, False])
def test_bad_cache_limit_raises_value_error(bad):
    before = lf.eager.get_cache_limit()
    with pytest.raises(ValueError):
        lf.eager.set_cache_limit(bad)
    assert lf.eager.get_cache_limit() == before


def test_default_limits_are_documented():
    assert cache_mod.DEFAULT_CACHE_SIZE == 4096 and cache_mod.DEFAULT_CACHE_BYTES == 2**30
    readme = open(os.path.join(os.path.dirname(__file__), "..", "README.md")).read()
    assert "4096" in readme and "LAZYFLOW_EAGER_CACHE_SIZE" in readme
    assert "1 GiB" in readme and "LAZYFLOW_EAGER_CACHE_BYTES" in readme and "set_cache_limit(bytes=" in readme


_CHILD = """
import numpy as np, lazyflow as lf
print(lf.eager.cache_info().maxsize, lf.eager.cache_info().maxbytes)
for n in range(1, 13):
    lf.neg(lf.tensor(np.zeros(n, np.float32)))
i = lf.eager.cache_info()
print(i.currsize, i.misses, i.evictions, i.currbytes)
"""


def _child(env_value, name="LAZYFLOW_EAGER_CACHE_SIZE"):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAZYFLOW_EAGER_CACHE_")}
    if env_value is not None:
        env[name] = env_value
    env["JAX_PLATFORMS"] = "cpu"
    return subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=120)


def test_environment_variable_bounds_the_cache():
    r = _child("5")
    assert r.returncode == 0, r.stderr
    limits, counts = r.stdout.split("\n")[:2]
    assert [int(v) for v in limits.split()] == [5, 2**30]
    assert [int(v) for v in counts.split()][:3] == [5, 12, 7]
    r = _child(None)
    assert r.returncode == 0, r.stderr
    assert [int(v) for v in r.stdout.split("\n")[0].split()] == [4096, 2**30]


def test_environment_variable_bounds_the_bytes():
    # 8 MiB hold four ~1.7 MB kernels: 12 misses evict 8 of them
    r = _child("8M", "LAZYFLOW_EAGER_CACHE_BYTES")
    assert r.returncode == 0, r.stderr
    limits, counts = r.stdout.split("\n")[:2]
    assert [int(v) for v in limits.split()] == [4096, 8 * 2**20]
    currsize, misses, evictions, currbytes = (int(v) for v in counts.split())
    assert misses == 12 and 1 < currsize < 12 and evictions == 12 - currsize and currbytes <= 8 * 2**20


def test_bad_environment_variable_fails_at_import():
    r = _child("zero")
    assert r.returncode != 0
    assert "CacheLimitError" in r.stderr and "LAZYFLOW_EAGER_CACHE_SIZE" in r.stderr and "'zero'" in r.stderr
    r = _child("-1G", "LAZYFLOW_EAGER_CACHE_BYTES")
    assert r.returncode != 0
    assert "CacheLimitError" in r.stderr and "LAZYFLOW_EAGER_CACHE_BYTES" in r.stderr and "'-1G'" in r.stderr


@pytest.mark.parametrize("raw", ["0", "-3", "abc", "1.5", ""])
def test_environment_variable_parser_rejects_bad_values(raw, monkeypatch):
    monkeypatch.setenv("LAZYFLOW_EAGER_CACHE_SIZE", raw)
    with pytest.raises(ValueError, match="LAZYFLOW_EAGER_CACHE_SIZE"):
        cache_mod._env_limit()
    monkeypatch.setenv("LAZYFLOW_EAGER_CACHE_SIZE", "17")
    assert cache_mod._env_limit() == 17
    monkeypatch.setenv("LAZYFLOW_EAGER_CACHE_SIZE", "17M")  # units are for bytes only
    with pytest.raises(lf.eager.CacheLimitError, match="positive integer, got '17M'"):
        cache_mod._env_limit()


@pytest.mark.parametrize(
    "raw,expected",
    [("4096", 4096), ("512M", 512 << 20), ("1G", 1 << 30), ("1GiB", 1 << 30), ("64 kB", 64 << 10), ("2t", 2 << 40)],
)
def test_bytes_environment_variable_accepts_units(raw, expected, monkeypatch):
    monkeypatch.setenv("LAZYFLOW_EAGER_CACHE_BYTES", raw)
    assert cache_mod._env_limit("LAZYFLOW_EAGER_CACHE_BYTES", 1, units=True) == expected


@pytest.mark.parametrize("raw", ["0", "0G", "-5M", "1.5G", "G", "abc", "", "12Q"])
def test_bytes_environment_variable_rejects_bad_values(raw, monkeypatch):
    monkeypatch.setenv("LAZYFLOW_EAGER_CACHE_BYTES", raw)
    with pytest.raises(
        lf.eager.CacheLimitError, match=f"LAZYFLOW_EAGER_CACHE_BYTES must be a positive integer of bytes.*got {raw!r}"
    ):
        cache_mod._env_limit("LAZYFLOW_EAGER_CACHE_BYTES", 1, units=True)


# --------------------------------------------------------------------------- byte budget


def _cached_bytes():
    """The sum of every cached entry's estimate: what ``currbytes`` must equal."""
    return sum(e.nbytes for t in cache_mod._tables.values() for e in t.values())


def _live_fingerprints():
    return [e.fingerprint for e in jax.devices()[0].client.live_executables()]


def test_entry_bytes_are_estimated_from_the_compiled_executable():
    x = _np_tensor(8)
    lf.neg(x)
    (neg,) = cache_mod.entries.values()
    hlo = neg.kernel.lower(x._value).compile().as_text()
    assert neg.nbytes == cache_mod.EXECUTABLE_BASE_BYTES + cache_mod.HLO_CHAR_BYTES * len(hlo)
    assert _info().currbytes == neg.nbytes == _cached_bytes()
    lf.softmax(_np_tensor(8, 16), dim=1)  # a bigger program costs more
    (soft,) = [e for e in cache_mod.entries.values() if e is not neg]
    assert soft.nbytes > neg.nbytes and _info().currbytes == neg.nbytes + soft.nbytes == _cached_bytes()


def test_byte_budget_evicts_least_recently_used_entries():
    f = Counting()
    xs = {n: _np_tensor(n) for n in range(10, 40)}
    f(xs[10])
    one = _info().currbytes
    lf.eager.set_cache_limit(bytes=int(3.5 * one))  # three entries' worth; the entry limit stays 4096
    assert _info().maxbytes == int(3.5 * one) and _info().maxsize == 4096
    f(xs[11])
    f(xs[12])
    f(xs[10])  # hit: 11 is now the least recently used
    assert _info().evictions == 0 and _info().currsize == 3
    f(xs[13])
    assert _info().evictions == 1 and _present(f) == [10, 12, 13] and f.traces == 4
    for n in range(14, 40):  # every further miss evicts exactly one entry; the bytes never exceed the budget
        before = _info()
        f(xs[n])
        after = _info()
        assert after.evictions == before.evictions + 1 and after.currsize == 3
        assert after.currbytes == _cached_bytes() <= after.maxbytes
    assert _present(f) == [37, 38, 39]


def test_limits_accept_numpy_integers():
    lf.eager.set_cache_limit(np.int64(7), bytes=np.uint32(2**31))
    info = _info()
    assert (info.maxsize, info.maxbytes) == (7, 2**31) and type(info.maxsize) is int and type(info.maxbytes) is int


def test_shrinking_the_byte_budget_evicts_at_once_and_both_limits_apply():
    f = Counting()
    xs = {n: _np_tensor(n) for n in range(10, 16)}
    for n in xs:
        f(xs[n])
    one = _info().currbytes // 6
    lf.eager.set_cache_limit(bytes=2 * one + one // 2)
    assert _info().evictions == 4 and _present(f) == [14, 15] and _info().currbytes == _cached_bytes()
    lf.eager.set_cache_limit(1, bytes=2**40)  # the entry limit binds now
    assert _present(f) == [15] and _info().evictions == 5
    lf.eager.set_cache_limit(50)
    f(xs[14])
    f(xs[13])
    assert _info().currsize == 3 and _info().evictions == 5


def test_a_kernel_larger_than_the_budget_is_kept_until_the_next_miss():
    f = Counting()
    x, y = _np_tensor(3), _np_tensor(4)
    lf.eager.set_cache_limit(bytes=1)
    f(x)
    f(x)  # a hit, not a recompile
    assert f.traces == 1 and _info().currsize == 1 and _info().hits == 1
    f(y)
    assert _present(f) == [4] and _info().evictions == 1 and f.traces == 2


def test_a_hit_estimates_nothing(monkeypatch):
    """The hot path does no new work: a miss estimates its executable once, a hit never."""
    calls = []
    real = cache_mod.executable_bytes
    monkeypatch.setattr(cache_mod, "executable_bytes", lambda *a: calls.append(1) or real(*a))
    x, y = _np_tensor(5), _np_tensor(5)
    x + y
    lf.neg(x)
    x * 2.0
    assert len(calls) == 3
    for _ in range(5):
        x + y
        lf.neg(x)
        x * 2.0
        x.add_(1.0)  # in-place: a miss the first time round, then hits
    assert len(calls) == 4 and _info().hits == 19


@pytest.mark.parametrize("dtypes", ["none", "promote"])
def test_evicted_kernels_are_released(dtypes):
    """An evicted entry's jitted function and its executable die: nothing in JAX keeps them. With ``"none"`` the op's
    implementation is jitted without a cast wrapper -- the case whose executables stayed in JAX's shared cache."""
    f = Counting(dtypes)
    lf.eager.set_cache_limit(2)
    x = _np_tensor(7)
    gc.collect()
    live_before = len(_live_fingerprints())
    f(x)
    (entry,) = cache_mod.entries.values()
    kernel, fun = weakref.ref(entry.kernel), weakref.ref(entry.kernel._fun)
    fingerprint = entry.kernel.lower(x._value).compile().runtime_executable().fingerprint
    assert fingerprint in _live_fingerprints()
    del entry
    for n in range(8, 28):
        f(_np_tensor(n))
    gc.collect()
    assert _info().evictions == 19 and kernel() is None and fun() is None
    assert fingerprint not in _live_fingerprints()
    assert len(_live_fingerprints()) <= live_before + 2  # only the two cached kernels remain


def test_backward_kernels_are_charged_to_their_entry_and_released_with_it():
    lf.eager.set_cache_limit(bytes=2**40)
    x = lf.tensor(np.linspace(-1.0, 1.0, 6), requires_grad=True)
    y = lf.tanh(x)
    (tanh,) = [e for k, e in cache_mod.entries.items() if k[0] is REGISTRY["tanh"]]
    forward_bytes = tanh.nbytes
    y.backward(lf.ones(6))
    assert _info().backward_compiles >= 1 and tanh.nbytes > forward_bytes and _info().currbytes == _cached_bytes()
    np.testing.assert_allclose(x.grad.numpy(), 1 - np.tanh(np.linspace(-1.0, 1.0, 6)) ** 2, rtol=1e-12)
    (bwd,) = tanh._bwd.values()
    bwd_fun = weakref.ref(bwd._fun)
    del bwd, tanh, y
    lf.eager.set_cache_limit(1)  # evicts the tanh entry (and everything else but the newest)
    gc.collect()
    assert bwd_fun() is None
    assert _info().currbytes == _cached_bytes()


def test_backward_of_an_evicted_entry_is_not_charged_to_the_cache():
    x = lf.tensor(np.linspace(0.5, 1.5, 4), requires_grad=True)
    y = lf.exp(x)  # its entry is evicted below, but y's graph still holds it
    lf.eager.set_cache_limit(1)
    z = y * 3.0
    assert not [k for k in cache_mod.entries if k[0] is REGISTRY["exp"]]
    z.sum().backward()
    assert _info().currbytes == _cached_bytes()
    np.testing.assert_allclose(x.grad.numpy(), 3 * np.exp(np.linspace(0.5, 1.5, 4)), rtol=1e-12)


_RSS_CHILD = """
import gc, numpy as np, lazyflow as lf

def rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS"))

ops = [lf.isnan, lf.isfinite, lf.neg, lambda t: t.sum(dim=0)]  # isnan, isfinite: no cast wrapper of their own
for n in range(1, 9):  # warm up each op twice: one-time costs are not the cache's
    ops[n % 4](lf.tensor(np.zeros((1000 + n, 2), np.float32)))
lf.eager.clear_cache()
gc.collect()
base = rss()
for n in range(1, 49):
    ops[n % 4](lf.tensor(np.zeros((n, 2), np.float32)))
gc.collect()
i = lf.eager.cache_info()
print(rss() - base, i.misses, i.evictions, i.currbytes, i.maxbytes)
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads VmRSS from /proc")
def test_resident_memory_stays_within_the_byte_budget():
    """48 new signatures under a 4 MiB budget (2 entries): RSS grows by the budget plus JAX's own bounded
    bookkeeping, not by 48 kernels (~75 MiB, what evicted-but-alive executables cost)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAZYFLOW_EAGER_CACHE_")}
    env.update(JAX_PLATFORMS="cpu", LAZYFLOW_EAGER_CACHE_BYTES="4M")
    r = subprocess.run([sys.executable, "-c", _RSS_CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    growth, misses, evictions, currbytes, maxbytes = (int(v) for v in r.stdout.split())
    print(f"RSS grew {growth / 2**20:.1f} MiB over {misses} misses")
    assert misses == 48 and evictions >= 45 and currbytes <= maxbytes == 4 * 2**20
    assert growth < maxbytes + 12 * 2**20, f"RSS grew {growth / 2**20:.0f} MiB over 48 misses"


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (dict(bytes=0), lf.eager.CacheLimitError, "bytes must be a positive int, got 0; pass e.g. bytes="),
        (dict(bytes=-(2**30)), lf.eager.CacheLimitError, "bytes must be a positive int, got -1073741824"),
        (dict(bytes=1.5e9), lf.eager.CacheLimitTypeError, "bytes must be a positive int, got float 1500000000.0"),
        (dict(bytes="1G"), lf.eager.CacheLimitTypeError, "bytes must be a positive int, got str '1G'"),
        (dict(bytes=True), lf.eager.CacheLimitTypeError, "bytes must be a positive int, got bool True"),
        (dict(bytes=np.True_), lf.eager.CacheLimitTypeError, "bytes must be a positive int, got bool np.True_"),
        (dict(n=np.int64(-2)), lf.eager.CacheLimitError, "n must be a positive int, got -2"),
        (dict(n=0), lf.eager.CacheLimitError, "n must be a positive int, got 0"),
        (dict(n=8, bytes=-1), lf.eager.CacheLimitError, "bytes must be a positive int, got -1"),
        ({}, lf.eager.CacheLimitTypeError, "pass n \\(entries\\), bytes, or both"),
    ],
)
def test_bad_limits_raise_named_errors_and_change_nothing(kwargs, error, match):
    f = Counting()
    for n in range(1, 4):
        f(_np_tensor(n))
    before = _info()
    with pytest.raises(error, match=match) as info:
        lf.eager.set_cache_limit(**kwargs)
    assert isinstance(info.value, lf.LazyflowError) and isinstance(info.value, ValueError)
    assert isinstance(info.value, TypeError) == (error is lf.eager.CacheLimitTypeError)
    assert _info() == before


# --------------------------------------------------------------------------- backward kernels


def test_second_identical_backward_compiles_nothing():
    xv = np.linspace(-1.0, 1.0, 6).reshape(2, 3)
    wv = np.linspace(0.5, 2.0, 12).reshape(3, 4)

    def step():
        x = lf.tensor(xv, requires_grad=True)
        w = lf.tensor(wv, requires_grad=True)
        loss = (lf.tanh(x @ w) * 3.0).sum()
        loss.backward()
        return x.grad.numpy(), w.grad.numpy()

    step()
    first = _info()
    assert first.backward_compiles >= 3  # matmul, tanh, mul (sum's too)
    gx, gw = step()
    second = _info()
    assert second.backward_compiles == first.backward_compiles
    assert second.misses == first.misses and second.currsize == first.currsize

    ref = jax.grad(lambda x, w: (jnp.tanh(x @ w) * 3.0).sum(), argnums=(0, 1))(xv, wv)
    np.testing.assert_allclose(gx, np.asarray(ref[0]), rtol=1e-12)
    np.testing.assert_allclose(gw, np.asarray(ref[1]), rtol=1e-12)

    x = lf.tensor(np.ones((5, 3)), requires_grad=True)  # a new signature compiles a new backward
    (lf.tanh(x @ lf.tensor(wv)) * 3.0).sum().backward()
    assert _info().backward_compiles > second.backward_compiles


def test_double_backward_reuses_cached_backward_ops():
    xv = np.array([0.3, -0.7, 1.1])

    def hvp():
        x = lf.tensor(xv, requires_grad=True)
        (g,) = lf.autograd.grad((lf.sin(x) * x).sum(), x, create_graph=True)
        (h,) = lf.autograd.grad(g.sum(), x)
        return h.numpy()

    hvp()
    first = _info()
    h = hvp()
    assert _info().misses == first.misses and _info().backward_compiles == first.backward_compiles
    ref = jax.grad(lambda x: jax.grad(lambda y: (jnp.sin(y) * y).sum())(x).sum())(xv)
    np.testing.assert_allclose(h, np.asarray(ref), rtol=1e-12)


def test_the_fast_paths_inline_tensor_is_the_same_as_make():
    """apply's cache-hit fast path builds its output Tensor inline (a copy of ``_make``'s body, one frame fewer): every
    slot a Tensor has must be set there, to what ``_make`` sets, or a slot added to the Tensor later would be missing
    (an AttributeError) only on outputs of cache hits."""
    from lazyflow._tensor import Tensor, _make

    x = lf.ones(3)
    _ = (x + 1, -x)  # the first calls compile; the next ones hit the fast paths
    hits = [x + 1, -x]  # two-operand and one-operand fast paths
    slots = [s for s in Tensor.__slots__ if s != "__weakref__"]
    for out in hits:
        ref = _make(out._value, out._meta)
        for s in slots:
            assert hasattr(out, s), f"fast path left Tensor.{s} unset"
            if s != "_value":
                assert getattr(out, s) == getattr(ref, s), s
