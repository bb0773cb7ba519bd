"""Single-file lazyflow checkpoints and file objects: ``lf.save(obj, "ckpt.pt")`` / ``lf.save(obj, f)`` write the
lazyflow layout zipped into one file; ``lf.load`` reads it with the same checksums and allowlist."""

import io
import os
import pickle
import zipfile

import numpy as np
import pytest
import torch

import lazyflow as lf
from lazyflow._core.errors import CheckpointError, CheckpointUnpicklingError
from lazyflow.checkpoint import _single_file


def state():
    torch.manual_seed(0)
    t = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    model = lf.nn.Sequential(lf.nn.Linear(3, 4), lf.nn.BatchNorm1d(4))
    model.load_state_dict({k: lf.tensor(v.numpy()) for k, v in t.state_dict().items()})
    return model, t.state_dict()


@pytest.mark.parametrize("suffix", _single_file.SUFFIXES)
def test_suffix_asks_for_a_single_file(tmp_path, suffix):
    model, ref = state()
    path = tmp_path / f"ckpt{suffix}"
    lf.save({"model": model.state_dict(), "epoch": 4}, path)
    assert path.is_file() and lf.checkpoint.detect_format(path) == "lazyflow-file"
    got = lf.load(path)
    assert got["epoch"] == 4
    for k, v in ref.items():
        np.testing.assert_array_equal(got["model"][k].numpy(), v.numpy())
    lf.save({"epoch": 5}, path)  # saving again replaces it
    assert lf.load(path) == {"epoch": 5}
    assert os.listdir(tmp_path) == [path.name]  # no temporary file left behind


def test_torch_style_user_code(tmp_path):
    """torch.save(model.state_dict(), "x.pt") / model.load_state_dict(torch.load("x.pt")), with lf."""
    model, ref = state()
    lf.save(model.state_dict(), tmp_path / "x.pt")
    fresh = lf.nn.Sequential(lf.nn.Linear(3, 4), lf.nn.BatchNorm1d(4))
    fresh.load_state_dict(lf.load(tmp_path / "x.pt"))
    for k, v in ref.items():
        np.testing.assert_array_equal(fresh.state_dict()[k].numpy(), v.numpy())


def test_file_objects(tmp_path):
    model, ref = state()
    buf = io.BytesIO()
    lf.save(model.state_dict(), buf)
    buf.seek(0)
    assert lf.checkpoint.detect_format(buf) == "lazyflow-file" and buf.tell() == 0
    got = lf.load(buf)
    view = buf.getbuffer()
    view[:] = bytes(len(view))  # the caller's buffer changes: the loaded tensors do not
    del view
    for k, v in ref.items():
        np.testing.assert_array_equal(got[k].numpy(), v.numpy())
    with open(tmp_path / "f.ckpt", "wb") as f:
        lf.save({"w": lf.arange(3)}, f)
    with open(tmp_path / "f.ckpt", "rb") as f:
        assert lf.load(f)["w"].tolist() == [0, 1, 2]


def test_directory_stays_the_default_and_for_async(tmp_path):
    lf.save({"w": lf.ones(2)}, tmp_path / "ckpt")
    assert (tmp_path / "ckpt").is_dir() and lf.checkpoint.detect_format(tmp_path / "ckpt") == "lazyflow"
    h = lf.save({"w": lf.ones(2)}, tmp_path / "async", async_save=True)
    assert h is not None
    h.wait()
    with pytest.raises(CheckpointError, match="async_save=True\\) writes checkpoint directories"):
        lf.save({"w": lf.ones(2)}, tmp_path / "a.pt", async_save=True)
    with pytest.raises(CheckpointError, match="async_save"):
        lf.save({"w": lf.ones(2)}, io.BytesIO(), async_save=True)
    with pytest.raises(CheckpointError, match="mmap"):
        lf.load(tmp_path / "ckpt", mmap=True)


class Custom:
    pass


def test_same_checksums_and_allowlist(tmp_path):
    path = tmp_path / "c.pt"
    lf.save({"w": lf.arange(1000.0), "obj": Custom()}, path)
    with pytest.raises(CheckpointUnpicklingError, match="refused the global"):
        lf.load(path)
    assert isinstance(lf.load(path, weights_only=False)["obj"], Custom)
    lf.save({"w": lf.arange(1000.0)}, path)
    with zipfile.ZipFile(path) as zf:  # stored: the tensor bytes lie in the file as written
        assert all(i.compress_type == zipfile.ZIP_STORED for i in zf.infolist())
        assert all(n.startswith(_single_file.PREFIX) for n in zf.namelist())
    raw = bytearray(path.read_bytes())
    needle = np.arange(1000.0, dtype=np.float32)[500:504].tobytes()
    pos = raw.find(needle)
    assert pos > 0
    raw[pos] ^= 0x10
    path.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="c.pt"):  # zip's CRC-32 (or the tensor checksum) refuses it
        lf.load(path)


def test_truncated_file_and_members_outside(tmp_path):
    path = tmp_path / "c.pt"
    lf.save({"w": lf.ones(100)}, path)
    raw = path.read_bytes()
    for cut in (4, len(raw) // 2, len(raw) - 10):
        (tmp_path / "t.pt").write_bytes(raw[:cut])
        with pytest.raises(CheckpointError, match="t.pt"):
            lf.load(tmp_path / "t.pt")
    for name in ("lazyflow-checkpoint/../evil", "lazyflow-checkpoint//abs", "lazyflow-checkpoint/a/../../x"):
        with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp_path / "e.pt", "w") as dst:
            for info in src.infolist():
                dst.writestr(info, src.read(info))
            dst.writestr(name, b"x")
        with pytest.raises(CheckpointError, match="points outside"):
            lf.load(tmp_path / "e.pt")
    assert not (tmp_path / "evil").exists() and not (tmp_path / "x").exists()
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp_path / "z.pt", "w") as dst:  # a zip bomb's shape
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info), compress_type=zipfile.ZIP_DEFLATED)
    with pytest.raises(CheckpointError, match="is compressed"):
        lf.load(tmp_path / "z.pt")


def test_failed_save_names_the_file_and_keeps_the_old_one(tmp_path):
    lf.save({"w": lf.ones(1)}, tmp_path / "c.pt")

    class Local:  # cannot be pickled
        pass

    with pytest.raises(CheckpointError, match=r"c.pt.*Can't pickle local object"):
        lf.save({"obj": Local()}, tmp_path / "c.pt")
    assert lf.load(tmp_path / "c.pt")["w"].tolist() == [1.0]
    assert os.listdir(tmp_path) == ["c.pt"]


def test_existing_foreign_file_is_not_replaced(tmp_path):
    (tmp_path / "notes.pt").write_bytes(pickle.dumps("mine"))
    with pytest.raises(CheckpointError, match="exists and is not a checkpoint"):
        lf.save({"w": lf.ones(1)}, tmp_path / "notes.pt")
    assert pickle.loads((tmp_path / "notes.pt").read_bytes()) == "mine"
    torch.save({"w": torch.ones(1)}, tmp_path / "t.pt")  # a checkpoint of another format is replaced
    lf.save({"w": lf.zeros(1)}, tmp_path / "t.pt")
    assert lf.load(tmp_path / "t.pt")["w"].tolist() == [0.0]


def test_map_location_and_format_names(tmp_path):
    lf.save({"w": lf.ones(2)}, tmp_path / "c.pt")
    assert lf.load(tmp_path / "c.pt", map_location="cpu")["w"].device == lf.device("cpu")
    assert set(lf.checkpoint.FORMATS) == {"lazyflow", "lazyflow-file", "torch", "safetensors", "safetensors-sharded"}
    with pytest.raises(CheckpointError, match="does not exist"):
        lf.checkpoint.detect_format(tmp_path / "nothing")
