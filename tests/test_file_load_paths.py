"""The one-read load paths of ``.pth`` and ``.safetensors`` files (lazyflow.checkpoint._arena): every record or
tensor lands in one buffer of the load's own, at 64-byte boundaries; the file's zip headers are checked from
memory; the layout safetensors files are read by is the one the package validated. References: torch and the
safetensors package read the same files."""

import gc
import json
import os
import struct
import zipfile
import zlib

import jax
import numpy as np
import pytest
import safetensors
import safetensors.numpy as stnp
import safetensors.torch as st
import torch

import lazyflow as lf
from lazyflow._core.errors import CheckpointError
from lazyflow.checkpoint import _arena, _crc
from lazyflow.checkpoint._torch_format import make_value

SIZES = [0, 1, 3, 17, 64, 65, 1000, 4096 + 5]


def mixed():
    g = torch.Generator().manual_seed(1)
    out = {}
    for i, n in enumerate(SIZES):  # odd byte counts: each tensor's padding to the next 64-byte boundary differs
        out[f"f{i}"] = torch.randn(n, generator=g)
        out[f"h{i}"] = torch.randn(n, generator=g).half()
        out[f"b{i}"] = torch.randint(0, 2, (n,), generator=g).bool()
        out[f"i{i}"] = torch.randint(-9, 9, (n,), generator=g).to(torch.int64)
    out["scalar"] = torch.tensor(3.5)
    out["bf"] = torch.randn(5, 3, generator=g).bfloat16()
    return out


def as_np(x):
    return x.float().numpy() if x.dtype == lf.bfloat16 else x.numpy()


def test_read_spans_matches_the_file_in_any_batching(tmp_path, monkeypatch):
    data = np.random.default_rng(0).integers(0, 256, 20_000, np.uint8).tobytes()
    (tmp_path / "f").write_bytes(data)
    sizes = [0, 5, 100, 1, 0, 64, 1000, 3, 7, 4000]
    for iov in (1, 3, 1024):  # one buffer per call, a few, all at once
        monkeypatch.setattr(_arena, "_IOV_MAX", iov)
        with open(tmp_path / "f", "rb") as f:
            pieces = _arena.read_spans(f.fileno(), 17, sizes, "f")
            pos = 17
            for p, n in zip(pieces, sizes):
                assert p.tobytes() == data[pos : pos + n] and p.ctypes.data % 64 == 0
                pos += n
            r = _arena.read_range(f.fileno(), 100, 30_000, "f")  # past the end: what the file has
            assert r.tobytes() == data[100:] and r.ctypes.data % 64 == 100 % 64
            with pytest.raises(CheckpointError, match="ends 100 bytes before its last tensor"):
                _arena.read_spans(f.fileno(), 19_000, [500, 600], "f")


def test_safetensors_of_mixed_sizes_load_exactly(tmp_path, monkeypatch):
    src = mixed()
    st.save_file(src, tmp_path / "m.safetensors")
    want = stnp.load_file(tmp_path / "m.safetensors") | {"bf": src["bf"].float().numpy()}
    monkeypatch.setattr(_arena, "_IOV_MAX", 7)  # several preadv calls, each ending mid-file
    got = lf.load(tmp_path / "m.safetensors")
    assert list(got) == list(safetensors.safe_open(tmp_path / "m.safetensors", framework="numpy").keys())
    for k, v in want.items():
        np.testing.assert_array_equal(as_np(got[k]), v, err_msg=k)
        assert tuple(got[k].shape) == v.shape


@pytest.mark.parametrize("suffix", ["pth", "safetensors"])
def test_a_kept_tensor_outlives_the_rest_of_its_load(tmp_path, suffix):
    src = {f"w{i}": torch.randn(300 + i) for i in range(20)}  # one shared host buffer behind all of them
    path = tmp_path / f"k.{suffix}"
    torch.save(src, path) if suffix == "pth" else st.save_file(src, path)
    keep = lf.load(path)["w7"]
    gc.collect()
    churn = [np.full(100_000, 7.0) for _ in range(20)]  # reuse freed memory, if the buffer had been freed
    np.testing.assert_array_equal(keep.numpy(), src["w7"].numpy())
    assert len(churn) == 20


def _header(raw):
    n = struct.unpack("<Q", raw[:8])[0]
    return n, json.loads(raw[8 : 8 + n])


def _with_header(header, body):
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + body


def test_safetensors_layout_the_read_relies_on_is_validated(tmp_path):
    """The tensors are read as consecutive spans ending at the file's end: files that break that are refused."""
    st.save_file({"a": torch.ones(4), "b": torch.arange(3.0)}, tmp_path / "ok.safetensors")
    raw = (tmp_path / "ok.safetensors").read_bytes()
    n, header = _header(raw)
    body = raw[8 + n :]
    (tmp_path / "tail.safetensors").write_bytes(raw + b"\0" * 8)  # trailing bytes after the last tensor
    with pytest.raises(CheckpointError, match="tail.safetensors"):
        lf.load(tmp_path / "tail.safetensors")
    gap = json.loads(json.dumps(header))
    for k in ("a", "b"):  # both spans moved 4 bytes on: a hole before the first
        gap[k]["data_offsets"] = [x + 4 for x in gap[k]["data_offsets"]]
    (tmp_path / "gap.safetensors").write_bytes(_with_header(gap, b"\0" * 4 + body))
    with pytest.raises(CheckpointError, match="gap.safetensors"):
        lf.load(tmp_path / "gap.safetensors")
    odd = json.loads(json.dumps(header))
    odd["a"]["dtype"] = "F8_E8M0"  # a dtype the package knows and lazyflow does not read
    odd["a"]["shape"] = [16]
    (tmp_path / "odd.safetensors").write_bytes(_with_header(odd, body))
    with pytest.raises(CheckpointError, match="odd.safetensors.*'a'"):
        lf.load(tmp_path / "odd.safetensors")


def test_safetensors_file_replaced_during_the_load_is_refused(tmp_path, monkeypatch):
    st.save_file({"a": torch.ones(4)}, tmp_path / "x.safetensors")
    st.save_file({"a": torch.ones(4), "b": torch.zeros(100)}, tmp_path / "y.safetensors")
    real = safetensors.safe_open

    def swapped(path, *args, **kwargs):  # another process replaces the file between lazyflow's open and the check
        (tmp_path / "y.safetensors").replace(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(safetensors, "safe_open", swapped)
    with pytest.raises(CheckpointError, match="changed while it was read"):
        lf.load(tmp_path / "x.safetensors")


def _record(raw, zf_path, key):
    with zipfile.ZipFile(zf_path) as zf:
        info = next(i for i in zf.infolist() if i.filename.endswith(f"/data/{key}"))
    return info.header_offset, info.filename


@pytest.mark.parametrize("mmap", [False, True], ids=["read", "mmap"])
def test_damaged_local_zip_headers_are_named(tmp_path, mmap):
    torch.save({"w": torch.randn(100), "v": torch.randn(50)}, tmp_path / "c.pt")
    raw = (tmp_path / "c.pt").read_bytes()
    h, name = _record(raw, tmp_path / "c.pt", "1")
    bad = bytearray(raw)
    bad[h : h + 4] = b"PK\x09\x09"  # the record's signature
    (tmp_path / "sig.pt").write_bytes(bytes(bad))
    with pytest.raises(CheckpointError, match="zip header of record 'data/1' is damaged"):
        lf.load(tmp_path / "sig.pt", mmap=mmap)
    bad = bytearray(raw)
    bad[h + 30 + len(name) - 1] ^= 0x02  # the record's name in its local header: '1' -> '3'
    (tmp_path / "name.pt").write_bytes(bytes(bad))
    with pytest.raises(CheckpointError, match="record 'data/1' names another record"):
        lf.load(tmp_path / "name.pt", mmap=mmap)
    torch.load(tmp_path / "c.pt", weights_only=True)  # the original is fine: the damage is what is refused


def test_compressed_and_unaligned_records_still_load(tmp_path):
    """A zip written by other tools: records not on 64-byte boundaries, one of them deflated (the read path for
    those is zipfile's; the device transfer copies unaligned records)."""
    src = {"w": torch.randn(3000), "v": torch.arange(40), "s": torch.tensor(2.0)}
    torch.save(src, tmp_path / "c.pt")
    with zipfile.ZipFile(tmp_path / "c.pt") as a, zipfile.ZipFile(tmp_path / "z.pt", "w") as b:
        for info in a.infolist():
            data = a.read(info)
            deflate = info.filename.endswith("/data/0")
            b.writestr(info.filename, data, zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED)
    want = torch.load(tmp_path / "z.pt", weights_only=True)
    got = lf.load(tmp_path / "z.pt")
    for k, v in want.items():
        np.testing.assert_array_equal(got[k].numpy(), v.numpy())
    with pytest.raises(CheckpointError, match="compressed; mmap=True needs stored records"):
        lf.load(tmp_path / "z.pt", mmap=True)


@pytest.mark.parametrize("suffix", ["pth", "safetensors"])
def test_a_path_lands_in_one_aligned_buffer_the_device_wraps(tmp_path, suffix):
    """The README's claim: memory of the load's own, which the CPU device takes without a second copy (each tensor
    in buffers of at most 8 MiB: tests/test_load_attacks_s6.py checks that one kept tensor does not pin the file)."""
    src = {f"w{i}": torch.randn(1000 + 7 * i) for i in range(12)}
    path = tmp_path / f"a.{suffix}"
    torch.save(src, path) if suffix == "pth" else st.save_file(src, path)
    got = lf.load(path)
    if got["w0"].device.type != "cpu":
        pytest.skip("zero-copy wrapping is the CPU client's")
    ptrs = sorted(v.jax().unsafe_buffer_pointer() for v in got.values())
    assert all(p % 64 == 0 for p in ptrs)
    for k, v in src.items():
        np.testing.assert_array_equal(got[k].numpy(), v.numpy())


@pytest.mark.parametrize("mmap", [False, True], ids=["read", "mmap"])
def test_forged_directory_offsets_read_nothing_past_the_file(tmp_path, mmap):
    """A central directory entry whose local-header offset lies far past the file's end: refused, naming the file
    (the one read is bounded by the file's size and the central directory, never by a claimed offset)."""
    torch.save({"w": torch.randn(100), "v": torch.randn(50)}, tmp_path / "c.pt")
    raw = bytearray((tmp_path / "c.pt").read_bytes())
    with zipfile.ZipFile(tmp_path / "c.pt") as zf:
        info = next(i for i in zf.infolist() if i.filename.endswith("/data/1"))
    pos = 0
    while True:  # the central directory entry of data/1
        central = raw.find(b"PK\x01\x02", pos)
        n = int.from_bytes(raw[central + 28 : central + 30], "little")
        if raw[central + 46 : central + 46 + n].decode() == info.filename:
            break
        pos = central + 4
    raw[central + 42 : central + 46] = (1 << 31).to_bytes(4, "little")  # 2 GiB on
    (tmp_path / "f.pt").write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="f.pt"):
        lf.load(tmp_path / "f.pt", mmap=mmap)


def test_make_value_takes_any_byte_order():
    """A loaded array in big-endian order becomes a Tensor of the same values (a native copy), not a numpy array."""
    src = np.arange(6, dtype=">f4").reshape(2, 3)
    got = make_value(src, lambda: jax.devices("cpu")[0], "x", "y")
    assert isinstance(got, lf.Tensor) and got.dtype is lf.float32
    np.testing.assert_array_equal(got.numpy(), np.arange(6, dtype=np.float32).reshape(2, 3))


def test_without_zlib_ng_the_checksums_run_in_threads_and_still_refuse(tmp_path, monkeypatch):
    """The fast-load extra is optional: with the standard library's crc32 (pooled) a flipped byte still raises."""
    monkeypatch.setattr(_crc, "FAST", False)
    monkeypatch.setattr(_crc, "crc32", zlib.crc32)
    src = {"w": torch.randn(5000), "v": torch.arange(10)}
    torch.save(src, tmp_path / "c.pt")
    got = lf.load(tmp_path / "c.pt")
    np.testing.assert_array_equal(got["w"].numpy(), src["w"].numpy())
    raw = bytearray((tmp_path / "c.pt").read_bytes())
    raw[raw.find(src["w"].numpy().tobytes()[:64]) + 100] ^= 0x10
    (tmp_path / "f.pt").write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="record 'data/0'.*CRC-32 does not match"):
        lf.load(tmp_path / "f.pt")


def test_a_record_stored_twice_is_refused(tmp_path):
    """A zip may hold one name twice; torch (miniz) and Python's zipfile may resolve it to different entries (one file,
    two models: tests/test_load_attacks_s6.py has such a file), so the load refuses it."""
    torch.save({"w": torch.arange(16.0)}, tmp_path / "c.pt")
    with zipfile.ZipFile(tmp_path / "c.pt") as a:
        members = [(i.filename, a.read(i)) for i in a.infolist()]
    data0 = next(n for n, _ in members if n.endswith("/data/0"))
    with pytest.warns(UserWarning, match="Duplicate name"), zipfile.ZipFile(tmp_path / "d.pt", "w") as b:
        for name, data in members:
            if name == data0:
                b.writestr(name, np.full(16, 7.0, np.float32).tobytes())  # an earlier entry of the same name
            b.writestr(name, data)
    for mmap in (False, True):
        with pytest.raises(CheckpointError, match="twice"):
            lf.load(tmp_path / "d.pt", mmap=mmap)


def _mapping_of(addr: int) -> tuple[str, set[str]]:
    """The permissions (e.g. ``rw-p``) and VmFlags of the mapping of this process holding ``addr``."""
    perms, flags, inside = "", set(), False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and all(c in "0123456789abcdef-" for c in head[0]):
                lo, hi = (int(x, 16) for x in head[0].split("-"))
                inside = lo <= addr < hi
                if inside:
                    perms = head[1]
            elif inside and head[0] == "VmFlags:":
                flags = set(head[1:])
    assert perms, f"no mapping holds {addr:#x}"
    return perms, flags


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="reads Linux's /proc/self/smaps")
@pytest.mark.parametrize("suffix", ["pth", "safetensors", "lazyflow"])
def test_large_load_buffers_are_private_pages_without_huge_page_advice(tmp_path, suffix):
    """_arena._raw's claim: a load's buffers of 2 MiB and more are private anonymous pages (a shared mapping's pages
    come from shmem and fault ~40% slower) without numpy's MADV_HUGEPAGE advice (synchronous compaction stalls of
    hundreds of ms in a fresh process where THP defrag is ``madvise``). Linux's smaps names both: the ``s``/``p``
    of the permissions and the ``hg`` VmFlag."""
    src = {"big": torch.randn(3 << 20), "small": torch.randn(10)}  # 12 MiB: an allocation of its own
    path = tmp_path / f"a.{suffix}"
    if suffix == "pth":
        torch.save(src, path)
    elif suffix == "safetensors":
        st.save_file(src, path)
    else:
        lf.save({k: lf.tensor(v.numpy()) for k, v in src.items()}, path)
    got = lf.load(path)
    big = got["big"]
    if big.device.type != "cpu":
        pytest.skip("zero-copy wrapping is the CPU client's")
    np.testing.assert_array_equal(big.numpy(), src["big"].numpy())
    perms, flags = _mapping_of(big.jax().unsafe_buffer_pointer())
    assert perms.endswith("p"), f"load buffer mapped {perms}, expected a private mapping"
    assert "hg" not in flags, f"load buffer advised MADV_HUGEPAGE: {sorted(flags)}"
