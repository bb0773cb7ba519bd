"""Adversarial review of the one-buffer checkpoint read (lazyflow/checkpoint/_arena.py): loaded tensors share one
host buffer, so in-place ops, optimizer steps (donation) and lf.nn.Graph steps must still leave every other loaded
tensor intact and match torch; forged zip directories / safetensors headers fail with a CheckpointError naming
the file; nothing reachable by the caller is aliased; a failed load changes no model."""

import ctypes
import gc
import io
import json
import os
import struct
import zipfile
import zlib

import numpy as np
import pytest
import safetensors
import safetensors.torch as st
import torch

import lazyflow as lf
from lazyflow._core.errors import CheckpointError

nn = lf.nn


# ---------------------------------------------------------------- helpers
def _torch_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))


def _lf_model():
    return nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3))


def _data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(8, 5, generator=g), torch.randint(0, 3, (8,), generator=g)


def _write(tmp_path, kind, sd):
    if kind == "pth":
        p = tmp_path / "m.pth"
        torch.save(sd, p)
    else:
        p = tmp_path / "m.safetensors"
        st.save_file({k: v.contiguous() for k, v in sd.items()}, str(p))
    return str(p)


def _lf_load(path, **kw):
    return lf.load(path, **kw) if path.endswith(".pth") else lf.load(path)


def _np(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t.detach().numpy())


# ---------------------------------------------------------------- aliasing inside the one read buffer
@pytest.mark.parametrize("kind", ["pth", "safetensors"])
def test_inplace_on_one_loaded_tensor_leaves_neighbours(tmp_path, kind):
    # small tensors: neighbours in the arena, 64 bytes apart
    sd = {f"t{i}": torch.full((16,), float(i)) for i in range(6)}
    path = _write(tmp_path, kind, sd)
    out = _lf_load(path)
    t1 = out["t1"]
    t1.add_(1)
    t1.mul_(3)
    t1.copy_(lf.full((16,), 42.0))
    out["t2"].zero_()
    assert np.all(t1.numpy() == 42.0)
    for i in (0, 3, 4, 5):
        np.testing.assert_array_equal(out[f"t{i}"].numpy(), np.full(16, float(i), np.float32))
    np.testing.assert_array_equal(out["t2"].numpy(), np.zeros(16, np.float32))
    again = _lf_load(path)  # the file itself never changes
    for i in range(6):
        np.testing.assert_array_equal(again[f"t{i}"].numpy(), np.full(16, float(i), np.float32))


def test_inplace_on_views_of_one_storage_is_independent(tmp_path):
    base = torch.arange(64.0)
    sd = {"whole": base, "tail": base[16:], "same": base}  # one storage, referenced three times
    p = tmp_path / "v.pth"
    torch.save(sd, p)
    out = lf.load(str(p))
    ref = torch.load(p)
    assert (out["same"] is out["whole"]) == (ref["same"] is ref["whole"])  # pickle identity kept, as in torch
    out["whole"].add_(100)
    np.testing.assert_array_equal(out["tail"].numpy(), np.arange(16.0, 64.0, dtype=np.float32))
    out["tail"].fill_(-1)
    np.testing.assert_array_equal(out["whole"].numpy(), np.arange(64.0, dtype=np.float32) + 100)


@pytest.mark.parametrize("kind", ["pth", "safetensors"])
@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_eager_optimizer_on_loaded_model_matches_torch(tmp_path, kind, opt_name):
    tm = _torch_model()
    path = _write(tmp_path, kind, tm.state_dict())
    x, y = _data()
    lm = _lf_model()
    lm.load_state_dict(_lf_load(path))
    kw = {"lr": 0.1, "momentum": 0.9} if opt_name == "SGD" else {"lr": 0.05}
    topt = getattr(torch.optim, opt_name)(tm.parameters(), **kw)
    lopt = getattr(lf.optim, opt_name)(lm.parameters(), **kw)
    lx, ly = lf.tensor(x.numpy()), lf.tensor(y.numpy())
    for _ in range(4):
        topt.zero_grad()
        torch.nn.functional.cross_entropy(tm(x), y).backward()
        topt.step()
        lopt.zero_grad()
        nn.functional.cross_entropy(lm(lx), ly).backward()
        lopt.step()
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(lm.state_dict()[k].numpy(), v.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("kind", ["pth", "safetensors"])
def test_graph_steps_on_loaded_model_match_torch(tmp_path, kind):
    tm = _torch_model()
    path = _write(tmp_path, kind, tm.state_dict())
    x, y = _data()
    lm = _lf_model()
    loaded = _lf_load(path)
    lm.load_state_dict(loaded)
    lopt = lf.optim.SGD(lm.parameters(), lr=0.1, momentum=0.9)
    topt = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = lm
            self.add_optimizer(lopt)

        def build(self, a, b):
            loss = nn.functional.cross_entropy(self.model(a), b)
            loss.backward()
            return loss

    step = Step()
    lx, ly = lf.tensor(x.numpy()), lf.tensor(y.numpy())
    for _ in range(3):
        topt.zero_grad()
        torch.nn.functional.cross_entropy(tm(x), y).backward()
        topt.step()
        step(lx, ly)
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(lm.state_dict()[k].numpy(), v.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    # the loaded dict itself is untouched by the steps (the model holds copies)
    ref = torch.load(path) if kind == "pth" else st.load_file(path)
    for k, v in ref.items():
        np.testing.assert_array_equal(loaded[k].numpy(), v.numpy(), err_msg=k)


def test_optimizer_on_loaded_parameters_directly_donates_safely(tmp_path):
    # parameters straight from the file (no load_state_dict copy): the optimizer donates slices of the one buffer
    g = torch.Generator().manual_seed(3)
    ps = [torch.nn.Parameter(torch.randn(4, 4, generator=g)) for _ in range(4)]
    p = tmp_path / "p.pth"
    torch.save(ps, p)
    loaded = lf.load(str(p))
    ref = torch.load(p)
    assert all(isinstance(t, lf.nn.Parameter) for t in loaded)
    lopt = lf.optim.SGD(loaded[:2], lr=0.5, momentum=0.9)
    topt = torch.optim.SGD(ref[:2], lr=0.5, momentum=0.9)
    for _ in range(3):
        lopt.zero_grad()
        topt.zero_grad()
        sum((q * q).sum() for q in loaded[:2]).backward()
        sum((q * q).sum() for q in ref[:2]).backward()
        lopt.step()
        topt.step()
    for a, b in zip(loaded, ref):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-6)


def test_mmap_tensors_inplace_independent(tmp_path):
    sd = {f"t{i}": torch.full((16,), float(i)) for i in range(4)}
    p = tmp_path / "m.pth"
    torch.save(sd, p)
    out = lf.load(str(p), mmap=True)
    out["t1"].add_(5)
    np.testing.assert_array_equal(out["t2"].numpy(), np.full(16, 2.0, np.float32))
    np.testing.assert_array_equal(torch.load(p)["t1"].numpy(), np.full(16, 1.0, np.float32))  # file untouched


# ---------------------------------------------------------------- caller's memory is never aliased
def test_bytesio_buffer_not_aliased():
    sd = {"a": torch.arange(20000.0), "b": torch.arange(8.0)}
    buf = io.BytesIO()
    torch.save(sd, buf)
    buf.seek(0)
    out = lf.load(buf)
    view = buf.getbuffer()  # would fail with BufferError if a loaded tensor still exported the buffer
    raw = np.frombuffer(view, np.uint8)
    raw.setflags(write=True)
    raw[:] = 0
    del raw, view
    np.testing.assert_array_equal(out["a"].numpy(), np.arange(20000.0, dtype=np.float32))
    np.testing.assert_array_equal(out["b"].numpy(), np.arange(8.0, dtype=np.float32))


@pytest.mark.parametrize("kind", ["pth", "safetensors"])
def test_file_rewritten_after_load_not_seen(tmp_path, kind):
    path = _write(tmp_path, kind, {"a": torch.arange(32.0), "b": torch.ones(5)})
    out = _lf_load(path)
    with open(path, "r+b") as f:
        size = f.seek(0, 2)
        f.seek(0)
        f.write(b"\0" * size)
    np.testing.assert_array_equal(out["a"].numpy(), np.arange(32.0, dtype=np.float32))


# ---------------------------------------------------------------- forged torch zips
def _torch_records(sd):
    buf = io.BytesIO()
    torch.save(sd, buf)
    zf = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    return {i.filename: zf.read(i.filename) for i in zf.infolist()}


def _zip(records, extra=()):
    """A zip of ``records`` (stored); ``extra``: (name, header_offset_of, payload) central entries pointing at the
    data of an earlier record (overlapping it)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zf:
        for name, data in records.items():
            zf.writestr(name, data)
        for name, inside, delta, payload in extra:
            host = zf.getinfo(inside)
            zi = zipfile.ZipInfo(name)
            zi.header_offset = host.header_offset + 30 + len(host.filename.encode()) + len(host.extra) + delta
            zi.CRC = zlib.crc32(payload)
            zi.compress_size = zi.file_size = len(payload)
            zi.compress_type = zipfile.ZIP_STORED
            zf.filelist.append(zi)
            zf.NameToInfo[name] = zi
    return out.getvalue()


def _local(name, payload):
    m = io.BytesIO()
    with zipfile.ZipFile(m, "w", zipfile.ZIP_STORED) as z:
        z.writestr(name, payload)
    i = zipfile.ZipFile(io.BytesIO(m.getvalue())).infolist()[0]
    return m.getvalue()[: 30 + len(name) + len(i.extra) + len(payload)]


def _expect_error(path, *names):
    with pytest.raises(CheckpointError) as e:
        lf.load(str(path))
    msg = str(e.value)
    assert "f.pth" in msg, msg
    for n in names:
        assert n in msg, msg
    return msg


def test_overlapping_records_load_as_torch_does_or_refuse(tmp_path):
    payload1 = bytes(range(64))
    blob = _local("archive/data/1", payload1)
    recs = _torch_records({"a": torch.zeros(len(blob), dtype=torch.uint8), "b": torch.zeros(64, dtype=torch.uint8)})
    recs["archive/data/0"] = blob
    del recs["archive/data/1"]
    raw = _zip(recs, [("archive/data/1", "archive/data/0", 0, payload1)])
    p = tmp_path / "f.pth"
    p.write_bytes(raw)
    try:
        out = lf.load(str(p))
    except CheckpointError as e:
        assert "f.pth" in str(e)
        return
    np.testing.assert_array_equal(out["a"].numpy(), np.frombuffer(blob, np.uint8))
    np.testing.assert_array_equal(out["b"].numpy(), np.frombuffer(payload1, np.uint8))
    out["a"].zero_()  # overlapping records still give independent tensors
    np.testing.assert_array_equal(out["b"].numpy(), np.frombuffer(payload1, np.uint8))


def _patch_central(raw, name, **fields):
    """Rewrite fields of ``name``'s central directory entry: size (both sizes), offset, method."""
    pos = 0
    b = bytearray(raw)
    while True:
        pos = raw.index(b"PK\x01\x02", pos)
        n = struct.unpack_from("<H", raw, pos + 28)[0]
        if raw[pos + 46 : pos + 46 + n] == name.encode():
            break
        pos += 4
    if "size" in fields:
        struct.pack_into("<LL", b, pos + 20, fields["size"], fields["size"])
    if "offset" in fields:
        struct.pack_into("<L", b, pos + 42, fields["offset"])
    return bytes(b)


@pytest.mark.parametrize(
    "change,names",
    [
        ({"size": 0xFFFF_FFF0}, ["data/1"]),  # huge size: runs past the end
        ({"offset": 0x7FFF_FFF0}, ["data/1"]),  # header offset past EOF
        ({"offset": 0}, ["data/1"]),  # points at another record's header
        ({"size": 12}, ["storage '1'"]),  # size does not match numel*itemsize
    ],
)
def test_forged_central_directory(tmp_path, change, names):
    recs = _torch_records({"a": torch.arange(10.0), "b": torch.arange(7.0), "c": torch.ones(3)})
    raw = _patch_central(_zip(recs), "archive/data/1", **change)
    p = tmp_path / "f.pth"
    p.write_bytes(raw)
    try:
        zipfile.ZipFile(io.BytesIO(raw))
    except zipfile.BadZipFile:  # pragma: no cover - zipfile itself refuses: nothing of ours to check
        pytest.skip("zipfile refuses the directory")
    _expect_error(p, *names)


def test_missing_record_and_double_reference(tmp_path):
    base = torch.arange(6.0)
    recs = _torch_records({"a": base, "b": base.view(2, 3), "c": torch.ones(2)})
    raw = _zip({k: v for k, v in recs.items() if k != "archive/data/1"})
    p = tmp_path / "f.pth"
    p.write_bytes(raw)
    _expect_error(p, "storage '1'")
    p.write_bytes(_zip(recs))  # a record referenced twice: two correct, independent tensors
    out = lf.load(str(p))
    np.testing.assert_array_equal(out["b"].numpy(), np.arange(6.0, dtype=np.float32).reshape(2, 3))
    out["a"].add_(1)
    np.testing.assert_array_equal(out["b"].numpy(), np.arange(6.0, dtype=np.float32).reshape(2, 3))


def test_view_past_storage_end_and_compressed_record(tmp_path):
    recs = _torch_records({"a": torch.arange(6.0)[2:], "b": torch.arange(100.0)})
    p = tmp_path / "f.pth"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:  # data/1 deflated: not in the one read, still correct
        for k, v in recs.items():
            zf.writestr(k, v, zipfile.ZIP_DEFLATED if k.endswith("data/1") else zipfile.ZIP_STORED)
    p.write_bytes(out.getvalue())
    got = lf.load(str(p))
    np.testing.assert_array_equal(got["a"].numpy(), np.arange(2.0, 6.0, dtype=np.float32))
    np.testing.assert_array_equal(got["b"].numpy(), np.arange(100.0, dtype=np.float32))
    shrunk = dict(recs)
    shrunk["archive/data/0"] = recs["archive/data/0"][:12]  # 3 floats; the pickle says 6
    p.write_bytes(_zip(shrunk))
    _expect_error(p, "storage '0'")


def test_crc_mismatch_leaves_model_unchanged(tmp_path):
    tm = _torch_model()
    recs = _torch_records(tm.state_dict())
    last = sorted(k for k in recs if "/data/" in k)[-1]
    b = bytearray(recs[last])
    b[0] ^= 0xFF
    raw = _zip(recs)
    raw = raw.replace(bytes(recs[last]), bytes(b), 1)  # the payload only; the directory's CRC stays
    p = tmp_path / "f.pth"
    p.write_bytes(raw)
    lm = _lf_model()
    before = {k: v.numpy().copy() for k, v in lm.state_dict().items()}
    with pytest.raises(CheckpointError, match="CRC"):
        lm.load_state_dict(lf.load(str(p)))
    for k, v in lm.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])


def test_truncated_pth_names_file(tmp_path):
    recs = _torch_records({"a": torch.arange(30000.0), "b": torch.ones(3)})
    raw = _zip(recs)
    p = tmp_path / "f.pth"
    p.write_bytes(raw[: len(raw) // 2] + raw[-200:])  # keeps a (now wrong) directory tail
    with pytest.raises(CheckpointError) as e:
        lf.load(str(p))
    assert "f.pth" in str(e.value)


# ---------------------------------------------------------------- lying safetensors headers
def _st_file(header, data):
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


@pytest.mark.parametrize(
    "header,nbytes",
    [
        (
            {
                "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
            },
            12,
        ),
        (
            {
                "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                "b": {"dtype": "F32", "shape": [2], "data_offsets": [12, 20]},
            },
            20,
        ),
        ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, 8),
        ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, 16),  # data section longer than the tensors
        ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, 4),  # truncated
        ({"a": {"dtype": "F32", "shape": [2**62, 4], "data_offsets": [0, 8]}}, 8),  # numel overflows
    ],
)
def test_lying_safetensors_header(tmp_path, header, nbytes):
    p = tmp_path / "f.safetensors"
    p.write_bytes(_st_file(header, bytes(nbytes)))
    with pytest.raises(CheckpointError) as e:
        lf.load(str(p))
    assert "f.safetensors" in str(e.value)


def test_safetensors_huge_header_length(tmp_path):
    p = tmp_path / "f.safetensors"
    p.write_bytes(struct.pack("<Q", 2**62) + b"{}")
    with pytest.raises(CheckpointError, match="f.safetensors"):
        lf.load(str(p))


@pytest.mark.parametrize("how", ["append", "replace"])
def test_safetensors_changed_between_check_and_read(tmp_path, monkeypatch, how):
    p = tmp_path / "f.safetensors"
    st.save_file({"a": torch.arange(8.0), "b": torch.ones(4)}, str(p))
    other = tmp_path / "o.safetensors"
    st.save_file({"a": torch.zeros(8), "b": torch.zeros(4), "c": torch.zeros(100)}, str(other))
    real = safetensors.safe_open

    class Racing:
        def __init__(self, *a, **k):
            self.inner = real(*a, **k)

        def __enter__(self):
            f = self.inner.__enter__()
            if how == "append":
                with open(p, "ab") as fh:
                    fh.write(b"\0" * 64)
            else:
                other.replace(p)
            return f

        def __exit__(self, *a):
            return self.inner.__exit__(*a)

    monkeypatch.setattr(safetensors, "safe_open", Racing)
    with pytest.raises(CheckpointError, match="changed"):
        lf.load(str(p))


def test_safetensors_bad_load_leaves_model_unchanged(tmp_path):
    tm = _torch_model()
    p = tmp_path / "f.safetensors"
    st.save_file(tm.state_dict(), str(p))
    raw = p.read_bytes()
    p.write_bytes(raw[:-4])
    lm = _lf_model()
    before = {k: v.numpy().copy() for k, v in lm.state_dict().items()}
    with pytest.raises(CheckpointError, match="f.safetensors"):
        lm.load_state_dict(lf.load(str(p)))
    for k, v in lm.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])


# ---------------------------------------------------------------- memory: one kept tensor must not pin the file
def _rss_mib():
    """Resident MiB of live memory: freed heap memory is handed back first (lazyflow's malloc defaults keep it with
    the process for reuse, which is not pinning)."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux /proc")
@pytest.mark.parametrize("kind", ["pth", "safetensors"])
def test_one_kept_small_tensor_does_not_pin_the_whole_file(tmp_path, kind):
    """Bug found in review: every tensor of a load was a slice of ONE host buffer, so keeping a single small tensor
    (``emb = lf.load(p)["emb"]``) kept every byte of the file alive (torch: one storage each). 64 MiB file, 16-byte
    tensor kept: before the fix RSS stayed ~68 MiB higher; the earlier per-record reads held ~4 MiB."""
    path = _write(tmp_path, kind, {"small": torch.ones(4), "big": torch.ones(16 * 2**20)})
    gc.collect()
    before = _rss_mib()
    small = _lf_load(path)["small"]
    gc.collect()
    held = _rss_mib() - before
    np.testing.assert_array_equal(small.numpy(), np.ones(4, np.float32))
    assert held < 32, f"keeping a 16-byte tensor holds {held:.0f} MiB (the 64 MiB file's one read buffer)"


def test_buffers_bound_what_one_piece_pins():
    from lazyflow.checkpoint import _arena

    sizes = [0, 5, 3 << 20, 3 << 20, 3 << 20, 9 << 20, 64, 1]
    bufs = _arena._buffers(sizes)
    assert [b.nbytes for b in bufs] == sizes
    for b in bufs:
        assert b.ctypes.data % 64 == 0
        base = b.base if b.base is not None else b
        assert base.nbytes <= max(b.nbytes, 8 << 20) + (2 << 20)  # never more than one chunk (+ alignment slack)
    for b in bufs:  # disjoint
        b[:] = 0
    bufs[2][:] = 7
    assert not bufs[3].any() and not bufs[1].any()


def test_duplicate_record_name_is_refused_not_read_differently_from_torch(tmp_path):
    """Bug found in review: a zip holding 'archive/data/0' twice loaded the LAST copy in lazyflow (zipfile's rule)
    while torch.load (miniz) read the FIRST here: one file, two different models. Now refused."""
    recs = _torch_records({"a": torch.arange(4.0)})
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        for k, v in recs.items():
            zf.writestr(k, v)
        with pytest.warns(UserWarning, match="Duplicate name"):
            zf.writestr("archive/data/0", np.full(4, 9.0, np.float32).tobytes())
    p = tmp_path / "f.pth"
    p.write_bytes(out.getvalue())
    np.testing.assert_array_equal(torch.load(p)["a"].numpy(), np.arange(4.0, dtype=np.float32))  # torch: the first
    _expect_error(p, "data/0", "twice")
    with pytest.raises(CheckpointError, match="twice"):
        lf.load(str(p), mmap=True)
