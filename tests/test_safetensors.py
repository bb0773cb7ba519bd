"""safetensors through the ``safetensors`` package: files written by ``safetensors.torch`` load with ``lf.load``,
files ``lf.save`` writes load in ``safetensors.torch``; sharded checkpoints with an index; lying headers."""

import io
import json
import struct

import numpy as np
import pytest
import safetensors.torch as st
import torch

import lazyflow as lf
from lazyflow._core.errors import CheckpointError

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int16, torch.int32]
DTYPES += [torch.int64, torch.uint8, torch.bool]


def np_of(t):
    return t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()


def lf_np(t):
    return t.float().numpy() if t.dtype == lf.bfloat16 else t.numpy()


def tensors():
    g = torch.Generator().manual_seed(0)
    out = {}
    for dt in DTYPES:
        name = str(dt).split(".")[1]
        if dt == torch.bool:
            out[name] = torch.rand(3, 2, generator=g) > 0.5
        elif dt.is_floating_point:
            out[name] = torch.randn(3, 2, generator=g).to(dt)
        else:
            out[name] = torch.randint(0, 100, (3, 2), generator=g).to(dt)
    out["scalar"] = torch.tensor(2.5)
    out["empty"] = torch.zeros(0, 3)
    return out


def test_torch_written_file_loads(tmp_path):
    src = tensors()
    st.save_file(src, tmp_path / "x.safetensors", metadata={"format": "pt"})
    got = lf.load(tmp_path / "x.safetensors")
    assert set(got) == set(src)
    for k, v in src.items():
        np.testing.assert_array_equal(lf_np(got[k]), np_of(v), err_msg=k)
        assert tuple(got[k].shape) == tuple(v.shape)
    assert got["bfloat16"].dtype is lf.bfloat16 and got["bool"].dtype is lf.bool_
    assert lf.checkpoint.detect_format(tmp_path / "x.safetensors") == "safetensors"
    assert lf.checkpoint.safetensors_metadata(tmp_path / "x.safetensors") == {"format": "pt"}


def test_lazyflow_written_file_loads_in_torch(tmp_path):
    model = lf.nn.Sequential(lf.nn.Linear(3, 4), lf.nn.BatchNorm1d(4))
    sd = dict(model.state_dict())
    sd["bf"] = lf.arange(4, dtype=lf.float32).to(lf.bfloat16)
    sd["t"] = lf.arange(6.0).reshape(2, 3).t()  # not contiguous
    lf.save(sd, tmp_path / "m.safetensors", metadata={"epoch": "3"})  # the suffix picks the format
    got = st.load_file(tmp_path / "m.safetensors")
    for k, v in sd.items():
        np.testing.assert_array_equal(np_of(got[k]), lf_np(v), err_msg=k)
    assert got["bf"].dtype == torch.bfloat16
    from safetensors import safe_open

    with safe_open(tmp_path / "m.safetensors", framework="pt") as f:
        assert f.metadata() == {"epoch": "3"}
    buf = io.BytesIO()
    lf.save(sd, buf, format="safetensors")
    assert set(st.load(buf.getvalue())) == set(sd)
    buf.seek(0)
    back = lf.load(buf)
    np.testing.assert_array_equal(back["t"].numpy(), np.arange(6.0).reshape(2, 3).T)


def test_loaded_tensors_do_not_alias_the_file(tmp_path):
    st.save_file({"w": torch.ones(64)}, tmp_path / "a.safetensors")
    got = lf.load(tmp_path / "a.safetensors")
    raw = bytearray((tmp_path / "a.safetensors").read_bytes())
    raw[-64:] = bytes(64)  # overwrite the data in place
    with open(tmp_path / "a.safetensors", "r+b") as f:
        f.write(raw)
    np.testing.assert_array_equal(got["w"].numpy(), np.ones(64, np.float32))


def test_sharded_checkpoint_with_index(tmp_path):
    src = {f"layer{i}.weight": torch.randn(4, 4) for i in range(5)}
    shards = {"model-00001-of-00002.safetensors": ["layer0.weight", "layer1.weight", "layer2.weight"]}
    shards["model-00002-of-00002.safetensors"] = ["layer3.weight", "layer4.weight"]
    weight_map = {}
    for fname, keys in shards.items():
        st.save_file({k: src[k] for k in keys}, tmp_path / fname)
        weight_map.update({k: fname for k in keys})
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": 400}, "weight_map": weight_map}))
    for where in (index, tmp_path):  # the index file or its directory
        got = lf.load(where)
        assert list(got) == list(weight_map)
        for k, v in src.items():
            np.testing.assert_array_equal(got[k].numpy(), v.numpy())
    assert lf.checkpoint.detect_format(tmp_path) == "safetensors-sharded"
    bad = dict(weight_map, **{"layer4.weight": "model-00001-of-00002.safetensors"})
    index.write_text(json.dumps({"weight_map": bad}))
    with pytest.raises(CheckpointError, match="maps 'layer4.weight' to 'model-00001-of-00002.safetensors'"):
        lf.load(index)
    index.write_text(json.dumps({"weight_map": dict(weight_map, extra="../outside.safetensors")}))
    with pytest.raises(CheckpointError, match="not a file name in the index's directory"):
        lf.load(index)
    index.write_text(json.dumps({"weight_map": dict(weight_map, extra="gone.safetensors")}))
    with pytest.raises(CheckpointError, match="shard 'gone.safetensors' .*'extra'.* is missing"):
        lf.load(index)
    index.write_text("{not json")
    with pytest.raises(CheckpointError, match="not a safetensors index"):
        lf.load(index)


def test_lying_header_names_file_and_key(tmp_path):
    st.save_file({"a": torch.ones(2, 3), "b": torch.zeros(4)}, tmp_path / "ok.safetensors")
    raw = (tmp_path / "ok.safetensors").read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + n])
    lo, hi = header["b"]["data_offsets"]
    header["b"]["data_offsets"] = [lo, hi + 400]
    text = json.dumps(header).encode()
    (tmp_path / "lie.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n :])
    with pytest.raises(CheckpointError, match=r"lie.safetensors.*'b' lies at bytes"):
        lf.load(tmp_path / "lie.safetensors")
    with pytest.raises(CheckpointError, match="the file object.*'b' lies at bytes"):
        lf.load(io.BytesIO((tmp_path / "lie.safetensors").read_bytes()))


def test_truncated_and_flipped_files(tmp_path):
    st.save_file({"a": torch.ones(16), "b": torch.arange(8)}, tmp_path / "ok.safetensors")
    raw = (tmp_path / "ok.safetensors").read_bytes()
    for cut in (9, 20, len(raw) // 2, len(raw) - 1):
        (tmp_path / "t.safetensors").write_bytes(raw[:cut])
        with pytest.raises(CheckpointError, match="t.safetensors"):
            lf.load(tmp_path / "t.safetensors")
    n = struct.unpack("<Q", raw[:8])[0]
    for pos in range(8, 8 + n, 7):  # a flipped header byte: refused, or (whitespace, a digit of a name) loads
        bad = bytearray(raw)
        bad[pos] ^= 0x01
        (tmp_path / "f.safetensors").write_bytes(bytes(bad))
        try:
            got = lf.load(tmp_path / "f.safetensors")
        except CheckpointError:
            continue
        assert sum(int(np.prod(v.shape)) for v in got.values()) == 24


def test_bad_save_arguments(tmp_path):
    with pytest.raises(CheckpointError, match="holds tensors only; 'epoch' is a int"):
        lf.save({"w": lf.ones(1), "epoch": 3}, tmp_path / "x.safetensors")
    with pytest.raises(CheckpointError, match="flat"):
        lf.save([lf.ones(1)], tmp_path / "x.safetensors")
    with pytest.raises(CheckpointError, match="metadata must be a dict of strings"):
        lf.save({"w": lf.ones(1)}, tmp_path / "x.safetensors", metadata={"epoch": 3})  # type: ignore[dict-item]
    with pytest.raises(CheckpointError, match="metadata=.*safetensors format only"):
        lf.save({"w": lf.ones(1)}, tmp_path / "x.pt", metadata={"a": "b"})
    with pytest.raises(CheckpointError, match="async_save"):
        lf.save({"w": lf.ones(1)}, tmp_path / "x.safetensors", async_save=True)
    with pytest.raises(CheckpointError, match="mmap"):
        st.save_file({"w": torch.ones(1)}, tmp_path / "y.safetensors")
        lf.load(tmp_path / "y.safetensors", mmap=True)
    assert not (tmp_path / "x.safetensors").exists()


def test_model_loads_hub_style_weights(tmp_path):
    tnet = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 2))
    st.save_file(tnet.state_dict(), tmp_path / "model.safetensors")
    lnet = lf.nn.Sequential(lf.nn.Linear(5, 7), lf.nn.Tanh(), lf.nn.Linear(7, 2))
    lnet.load_state_dict(lf.load(tmp_path / "model.safetensors"))
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    with lf.no_grad():
        np.testing.assert_allclose(
            lnet(lf.tensor(x)).numpy(), tnet(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-6
        )
