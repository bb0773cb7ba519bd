"""lf.checkpoint.inspect on single files: torch.save files, .safetensors (one file or sharded), lazyflow's single
file, open file objects; compared with what torch / the safetensors package wrote. Plus the fast load paths
(zlib-ng's CRC-32, the direct device transfer) against their standard-library / jax.device_put references."""

import io
import json
import os
import struct
import sys
import zipfile
import zlib

import jax
import numpy as np
import pytest
import safetensors.torch as st
import torch

import lazyflow as lf
from lazyflow._core.errors import CheckpointError, CheckpointUnpicklingError
from lazyflow.checkpoint import _crc, _put, _torch_format
from lazyflow.checkpoint._torch_format import aligned

sys.path.insert(0, os.path.dirname(__file__))
from test_torch_format import _Call, make_pt

inspect = lf.checkpoint.inspect


def torch_dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def test_torch_file_lists_every_tensor_without_reading_data(tmp_path, monkeypatch):
    base = torch.randn(6, 4)
    obj = {
        "model": torch.nn.Linear(3, 2).state_dict(),
        "p": torch.nn.Parameter(torch.ones(5, dtype=torch.float64)),
        "frozen": torch.nn.Parameter(torch.ones(2), requires_grad=False),
        "views": [base, base[2:4, 1]],  # two tensors of one storage
        "extras": {"c": torch.zeros(3, dtype=torch.complex64), "u": torch.zeros(2, dtype=torch.uint16)},
        "bf": torch.ones(2, 2, dtype=torch.bfloat16),
        "step": 7,
        "name": "x",
    }
    path = tmp_path / "ck.pt"
    torch.save(obj, path)
    read = []
    original = _torch_format._TorchReader._read
    monkeypatch.setattr(_torch_format._TorchReader, "_read", lambda self, m, w: read.append(m) or original(self, m, w))
    info = inspect(path)
    assert read and not [m for m in read if "/data/" in m]  # data.pkl and the small records only, no storage
    lf.load(path)
    assert [m for m in read if "/data/" in m]  # the spy sees storage reads when there are some
    want = {
        "model.weight": obj["model"]["weight"],
        "model.bias": obj["model"]["bias"],
        "p": obj["p"],
        "frozen": obj["frozen"],
        "views.0": base,
        "views.1": base[2:4, 1],
        "extras.c": obj["extras"]["c"],
        "extras.u": obj["extras"]["u"],
        "bf": obj["bf"],
    }
    assert list(info) == list(want)
    for k, t in want.items():
        i = info[k]
        assert i.key == k and i.shape == tuple(t.shape), (k, i)
        assert str(i.dtype).removeprefix("lazyflow.") == torch_dtype_name(t), (k, i.dtype)
        assert i.nbytes == t.numel() * t.element_size() and i.device == "cpu" and i.sharding is None
    assert [info[k].kind for k in ("p", "frozen", "model.weight", "extras.c", "extras.u")] == [
        "parameter",
        "parameter",
        "tensor",
        "tensor",  # complex64: a lazyflow dtype
        "ndarray",
    ]
    assert info["p"].requires_grad and not info["frozen"].requires_grad and not info["model.weight"].requires_grad
    assert (info["views.0"].storage, info["views.1"].storage) == ("array", "same")
    # an open file gives the same listing and is left where it was
    f = io.BytesIO(path.read_bytes())
    assert inspect(f) == info and f.tell() == 0


def test_torch_file_bad_input(tmp_path, monkeypatch):
    torch.save({"w": torch.ones(64, 64)}, tmp_path / "ok.pt")
    raw = (tmp_path / "ok.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(CheckpointError, match="cut.pt"):
        inspect(tmp_path / "cut.pt")
    monkeypatch.chdir(tmp_path)
    make_pt(tmp_path / "evil.pt", {"x": _Call(os.system, "touch PWNED")})
    with pytest.raises(CheckpointUnpicklingError, match="refused"):
        inspect(tmp_path / "evil.pt")
    assert not (tmp_path / "PWNED").exists()
    # a storage record whose size disagrees with the pickle's element count
    with zipfile.ZipFile(tmp_path / "ok.pt") as src, zipfile.ZipFile(tmp_path / "short.pt", "w") as dst:
        for m in src.infolist():
            data = src.read(m)
            dst.writestr(m.filename, data[:-4] if "/data/" in m.filename else data)
    with pytest.raises(CheckpointError, match="holds 16380 bytes, the pickle claims 4096 elements"):
        inspect(tmp_path / "short.pt")
    with pytest.raises(CheckpointError, match="does not exist"):
        inspect(tmp_path / "missing.pt")


def test_safetensors_file_and_sharded_index(tmp_path):
    src = {
        "a": torch.randn(3, 4),
        "b": torch.ones(5, dtype=torch.bfloat16),
        "c": torch.arange(4),
        "d": torch.zeros(2, 2, dtype=torch.bool),
    }
    st.save_file(src, tmp_path / "m.safetensors")
    info = inspect(tmp_path / "m.safetensors")
    assert sorted(info) == sorted(src)
    for k, t in src.items():
        assert info[k].shape == tuple(t.shape) and info[k].nbytes == t.numel() * t.element_size()
        assert str(info[k].dtype).removeprefix("lazyflow.") == torch_dtype_name(t)
        assert info[k].kind == "tensor" and not info[k].requires_grad
    assert inspect(io.BytesIO((tmp_path / "m.safetensors").read_bytes())) == info
    shards = {"s1.safetensors": ["a", "b"], "s2.safetensors": ["c", "d"]}
    weight_map = {}
    for fname, keys in shards.items():
        st.save_file({k: src[k] for k in keys}, tmp_path / fname)
        weight_map.update({k: fname for k in keys})
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": weight_map}))
    for where in (index, tmp_path):
        got = inspect(where)
        assert list(got) == list(weight_map) and all(got[k] == info[k] for k in got)
    index.write_text(json.dumps({"weight_map": dict(weight_map, d="s1.safetensors")}))
    with pytest.raises(CheckpointError, match="maps 'd' to 's1.safetensors'"):
        inspect(index)


def test_safetensors_lying_header(tmp_path):
    st.save_file({"a": torch.ones(2, 3), "b": torch.zeros(4)}, tmp_path / "ok.safetensors")
    raw = (tmp_path / "ok.safetensors").read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + n])
    header["b"]["data_offsets"] = [header["b"]["data_offsets"][0], header["b"]["data_offsets"][1] + 400]
    text = json.dumps(header).encode()
    (tmp_path / "lie.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n :])
    with pytest.raises(CheckpointError, match="lie.safetensors.*cannot read it"):
        inspect(tmp_path / "lie.safetensors")


def test_lazyflow_single_file_and_directory(tmp_path):
    obj = {"w": lf.ones(2, 3), "p": lf.nn.Parameter(lf.zeros(4))}
    lf.save(obj, tmp_path / "one.pt")
    lf.save(obj, tmp_path / "dir")
    single, directory = inspect(tmp_path / "one.pt"), inspect(tmp_path / "dir")
    assert single == directory
    assert single["w"].shape == (2, 3) and single["p"].kind == "parameter" and single["p"].requires_grad
    assert inspect(io.BytesIO((tmp_path / "one.pt").read_bytes())) == single
    raw = (tmp_path / "one.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(raw[:-200])
    with pytest.raises(CheckpointError):
        inspect(tmp_path / "cut.pt")


# ------------------------------------------------------------------------------------------ fast load paths
def test_crc32_is_zlibs_crc32():
    assert _crc.FAST  # the test extra installs zlib-ng (the fast-load extra)
    rng = np.random.default_rng(0)
    for n in (0, 1, 63, 4096, (1 << 20) + 3):
        data = rng.integers(0, 256, n, dtype=np.uint8)
        assert _crc.crc32(data) == zlib.crc32(data.tobytes())  # pyright: ignore[reportArgumentType]


def test_put_is_device_put():
    dev = jax.devices()[0]
    a = aligned(4096 * 4).view(np.float32)
    a[:] = np.arange(4096)
    got = _put.put(a, dev)
    ref = jax.device_put(a, dev)
    assert got.sharding == ref.sharding and got.dtype == ref.dtype and got.committed == ref.committed
    np.testing.assert_array_equal(np.asarray(got), np.arange(4096, dtype=np.float32))
    # an aligned host buffer is wrapped, as device_put does; an unaligned one is copied
    assert got.unsafe_buffer_pointer() == a.ctypes.data == ref.unsafe_buffer_pointer()
    raw = np.zeros(4097 * 4 + 4, np.uint8)
    off = (-raw.ctypes.data % 64) + 4
    b = raw[off : off + 4096 * 4].view(np.float32)
    b[:] = 1
    assert _put.put(b, dev).unsafe_buffer_pointer() != b.ctypes.data
    for dt in (np.float64, np.int64, lf.bfloat16.np, np.bool_):
        x = np.ones((2, 3), dt)
        assert _put.put(x, dev).dtype == jax.device_put(x, dev).dtype


def test_put_falls_back_to_device_put(monkeypatch):
    class Broken:
        @staticmethod
        def batched_device_put(*a, **k):
            raise AttributeError("moved")

    monkeypatch.setattr(_put, "_xc", Broken)
    monkeypatch.setitem(_put._fast, "ok", True)
    got = _put.put(np.arange(3.0), jax.devices()[0])
    np.testing.assert_array_equal(np.asarray(got), [0.0, 1.0, 2.0])
    assert _put._fast["ok"] is False  # remembered: later loads go straight to device_put


def test_mmap_trusts_the_stored_bytes_like_torch(tmp_path):
    """Documented: with mmap=True the storage records are not CRC-checked (the map is the file: reading all of it
    to checksum would undo the point of mapping); without mmap a flipped data byte raises."""
    w = torch.randn(1 << 15)
    torch.save({"w": w}, tmp_path / "c.pt")
    raw = bytearray((tmp_path / "c.pt").read_bytes())
    with zipfile.ZipFile(tmp_path / "c.pt") as zf:
        info = next(i for i in zf.infolist() if "/data/0" in i.filename)
    start = info.header_offset + 30 + len(info.filename) + int.from_bytes(raw[info.header_offset + 28 :][:2], "little")
    raw[start + 5] ^= 0x40
    (tmp_path / "f.pt").write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="record 'data/0'.*damaged"):
        lf.load(tmp_path / "f.pt")
    mapped = lf.load(tmp_path / "f.pt", mmap=True)["w"].numpy()
    assert not np.array_equal(mapped, w.numpy())
    np.testing.assert_array_equal(mapped, torch.load(tmp_path / "f.pt", weights_only=True, mmap=True)["w"].numpy())
