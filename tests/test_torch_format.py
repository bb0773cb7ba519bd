"""PyTorch's file format without torch in lazyflow: torch writes the files these tests read (``lf.load``), and
torch reads the files lazyflow writes (``lf.save(..., format="torch")``, ``torch.load(weights_only=True)``)."""

import collections
import io
import os
import pickle
import zipfile

import numpy as np
import pytest
import torch

import lazyflow as lf
from lazyflow._core.errors import CheckpointError, CheckpointUnpicklingError

DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.bool,
    torch.complex64,
    torch.complex128,
    torch.uint16,
    torch.uint32,
    torch.uint64,
]


def np_of(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return t.float().numpy()
    return t.numpy()


def lf_np(x) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    return x.float().numpy() if x.dtype == lf.bfloat16 else x.numpy()


def sample(dtype, shape=(3, 4)):
    g = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype, generator=g)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(0, 100, shape, generator=g).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_dtype_torch_writes(tmp_path, dtype):
    t = sample(dtype)
    torch.save({"t": t, "scalar": t[1, 2].clone(), "empty": t[:0]}, tmp_path / "x.pt")
    got = lf.load(tmp_path / "x.pt")
    for k in ("t", "scalar", "empty"):
        want = {"t": t, "scalar": t[1, 2], "empty": t[:0]}[k]
        np.testing.assert_array_equal(lf_np(got[k]), np_of(want))
        assert tuple(got[k].shape) == tuple(want.shape)
    name = str(dtype).split(".")[1]
    if name in ("uint16", "uint32", "uint64"):  # no lazyflow dtype: numpy arrays
        assert isinstance(got["t"], np.ndarray) and got["t"].dtype == np.dtype(name)
    else:
        assert got["t"].dtype is getattr(lf, name if name != "bool" else "bool_")


def test_views_into_shared_storages_are_separate_tensors(tmp_path):
    base = torch.arange(60, dtype=torch.float32)
    m = base.view(6, 10)
    views = {
        "base": base,
        "slice": base[7:19:3],
        "rows": m[2:4],
        "transposed": m.t(),
        "col": m[:, 3],
        "expanded": base[5:6].expand(4, 3),
        "window": m[1:5, 2:8:2],
    }
    torch.save(views, tmp_path / "v.pt")
    with zipfile.ZipFile(tmp_path / "v.pt") as zf:  # torch wrote one storage for all of them
        assert sum("/data/" in n for n in zf.namelist()) == 1
    got = lf.load(tmp_path / "v.pt")
    for k, v in views.items():
        np.testing.assert_array_equal(got[k].numpy(), v.numpy(), err_msg=k)
        assert tuple(got[k].shape) == tuple(v.shape)
    got["slice"].add_(100)  # separate tensors: changing one changes no other
    np.testing.assert_array_equal(got["base"].numpy(), base.numpy())


class TorchNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU())
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.features(x))


def test_module_optimizer_scheduler_state_dicts(tmp_path):
    net = TorchNet()
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    net(torch.randn(5, 4)).sum().backward()
    opt.step()
    sched.step()
    ckpt = {"model": net.state_dict(), "optim": opt.state_dict(), "sched": sched.state_dict(), "epoch": 7}
    torch.save(ckpt, tmp_path / "c.pt")
    got = lf.load(tmp_path / "c.pt")
    assert isinstance(got["model"], collections.OrderedDict)
    assert list(got["model"]) == list(ckpt["model"])
    assert got["model"]._metadata == ckpt["model"]._metadata  # torch's per-module version record survives
    for k, v in ckpt["model"].items():
        np.testing.assert_array_equal(got["model"][k].numpy(), v.numpy())
    assert got["model"]["features.1.num_batches_tracked"].dtype is lf.int64
    assert got["optim"]["param_groups"] == ckpt["optim"]["param_groups"]
    for i, st in ckpt["optim"]["state"].items():
        for name, v in st.items():
            np.testing.assert_array_equal(got["optim"]["state"][i][name].numpy(), v.numpy())
    assert got["sched"] == ckpt["sched"] and got["epoch"] == 7


def test_containers_size_device_dtype_parameter(tmp_path):
    p = torch.nn.Parameter(torch.ones(2, 3))
    obj = {
        "nested": [({"a": torch.zeros(2)}, (1, 2.5, "s", None, True, b"by"))],
        "size": torch.Size([2, 3]),
        "device": torch.device("cpu"),
        "dtypes": [torch.float16, torch.bfloat16, torch.int64],
        "param": p,
        "frozen": torch.nn.Parameter(torch.ones(1), requires_grad=False),
        "grad": torch.ones(2, requires_grad=True),
        "set": {1, 2},
    }
    torch.save(obj, tmp_path / "o.pt")
    got = lf.load(tmp_path / "o.pt")
    assert got["nested"][0][1] == (1, 2.5, "s", None, True, b"by")
    np.testing.assert_array_equal(got["nested"][0][0]["a"].numpy(), np.zeros(2, np.float32))
    assert got["size"] == lf.Size([2, 3]) and isinstance(got["size"], lf.Size)
    assert got["device"] == lf.device("cpu")
    assert got["dtypes"] == [lf.float16, lf.bfloat16, lf.int64]
    assert isinstance(got["param"], lf.nn.Parameter) and got["param"].requires_grad
    assert isinstance(got["frozen"], lf.nn.Parameter) and not got["frozen"].requires_grad
    assert got["grad"].requires_grad and got["set"] == {1, 2}


def test_lazyflow_writes_what_torch_reads(tmp_path):
    model = lf.nn.Sequential(lf.nn.Linear(4, 8), lf.nn.BatchNorm1d(8), lf.nn.Linear(8, 2))
    obj = {
        "model": model.state_dict(),
        "bf16": lf.arange(6, dtype=lf.float32).to(lf.bfloat16).reshape(2, 3),
        "i64": lf.arange(5),
        "mask": lf.tensor([True, False]),
        "half": lf.ones(2, dtype=lf.float16),
        "scalar": lf.tensor(3.5),
        "empty": lf.zeros(0, 4),
        "noncontig": lf.arange(12.0).reshape(3, 4).t(),
        "param": lf.nn.Parameter(lf.ones(3)),
        "np": np.arange(4, dtype=np.int32),
        "meta": {"epoch": 3, "lr": 0.1, "dtype": lf.float16, "device": lf.device("cpu"), "size": lf.Size([1, 2])},
    }
    lf.save(obj, tmp_path / "l.pt", format="torch")
    got = torch.load(tmp_path / "l.pt", weights_only=True)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(got["model"][k].numpy(), v.numpy())
    assert got["bf16"].dtype == torch.bfloat16
    np.testing.assert_array_equal(got["bf16"].float().numpy(), np.arange(6.0).reshape(2, 3))
    assert got["i64"].dtype == torch.int64 and got["i64"].tolist() == [0, 1, 2, 3, 4]
    assert got["mask"].tolist() == [True, False] and got["half"].dtype == torch.float16
    assert got["scalar"].shape == () and got["scalar"].item() == 3.5
    assert got["empty"].shape == (0, 4)
    np.testing.assert_array_equal(got["noncontig"].numpy(), np.arange(12.0).reshape(3, 4).T)
    assert isinstance(got["param"], torch.nn.Parameter) and got["param"].requires_grad
    assert got["np"].tolist() == [0, 1, 2, 3] and got["np"].dtype == torch.int32
    assert got["meta"] == {
        "epoch": 3,
        "lr": 0.1,
        "dtype": torch.float16,
        "device": torch.device("cpu"),
        "size": torch.Size([1, 2]),
    }
    mm = torch.load(tmp_path / "l.pt", weights_only=True, mmap=True)  # torch maps lazyflow's aligned records
    np.testing.assert_array_equal(mm["i64"].numpy(), np.arange(5))
    with zipfile.ZipFile(tmp_path / "l.pt") as zf:  # stored (uncompressed), data at 64-byte offsets
        for info in zf.infolist():
            assert info.compress_type == zipfile.ZIP_STORED
            if "/data/" in info.filename:
                with open(tmp_path / "l.pt", "rb") as f:
                    f.seek(info.header_offset + 26)
                    n, m = int.from_bytes(f.read(2), "little"), int.from_bytes(f.read(2), "little")
                assert (info.header_offset + 30 + n + m) % 64 == 0, info.filename
    assert lf.checkpoint.detect_format(tmp_path / "l.pt") == "torch"
    back = lf.load(tmp_path / "l.pt")  # and lazyflow reads its own torch files
    np.testing.assert_array_equal(back["noncontig"].numpy(), np.arange(12.0).reshape(3, 4).T)


def test_file_objects_both_ways():
    t = torch.randn(3, 2)
    buf = io.BytesIO()
    torch.save({"t": t}, buf)
    buf.seek(0)
    got = lf.load(buf)
    np.testing.assert_array_equal(got["t"].numpy(), t.numpy())
    view = buf.getbuffer()  # the caller's buffer changes after the load: the tensor does not (copy at ingress)
    view[:] = bytes(len(view))
    del view
    np.testing.assert_array_equal(got["t"].numpy(), t.numpy())
    out = io.BytesIO()
    lf.save({"w": lf.ones(2)}, out, format="torch")
    out.seek(0)
    assert torch.load(out, weights_only=True)["w"].tolist() == [1.0, 1.0]


def test_mmap_maps_the_stored_records(tmp_path):
    t = torch.randn(64, 16)
    torch.save({"t": t, "v": t[3:9, 2]}, tmp_path / "m.pt")
    got = lf.load(tmp_path / "m.pt", mmap=True)
    np.testing.assert_array_equal(got["t"].numpy(), t.numpy())
    np.testing.assert_array_equal(got["v"].numpy(), t[3:9, 2].numpy())
    with pytest.raises(CheckpointError, match="mmap"):  # a zip whose record is compressed cannot be mapped
        with zipfile.ZipFile(tmp_path / "m.pt") as src, zipfile.ZipFile(tmp_path / "z.pt", "w") as dst:
            for info in src.infolist():
                dst.writestr(info.filename, src.read(info), compress_type=zipfile.ZIP_DEFLATED)
        lf.load(tmp_path / "z.pt", mmap=True)
    np.testing.assert_array_equal(lf.load(tmp_path / "z.pt")["t"].numpy(), t.numpy())  # read, it loads


def rewrite(path, out, edit):
    """Copy a torch zip file, passing each member's bytes through ``edit(name, data)``."""
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            data = edit(info.filename, src.read(info))
            if data is not None:
                dst.writestr(info.filename, data)


def test_map_location(tmp_path):
    torch.save({"t": torch.arange(3.0)}, tmp_path / "c.pt")
    # a file saved on a GPU: torch writes the location string into the pickle
    rewrite(
        tmp_path / "c.pt",
        tmp_path / "g.pt",
        lambda n, d: d.replace(b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00cuda:0") if n.endswith("data.pkl") else d,
    )
    assert torch.load(tmp_path / "g.pt", map_location="cpu")["t"].tolist() == [0.0, 1.0, 2.0]  # torch agrees
    if not lf.cuda.is_available():
        with pytest.raises(CheckpointError, match="cuda:0.*map_location"):
            lf.load(tmp_path / "g.pt")
        with pytest.raises(CheckpointError, match="cuda:0"):
            lf.load(tmp_path / "g.pt", map_location=lambda storage, loc: None)  # None: the saved location
    for ml in ("cpu", lf.device("cpu"), {"cuda:0": "cpu"}, lambda storage, loc: storage, lambda s, loc: s.cpu()):
        got = lf.load(tmp_path / "g.pt", map_location=ml)["t"]
        assert got.tolist() == [0.0, 1.0, 2.0] and got.device == lf.device("cpu")
    seen = []
    lf.load(tmp_path / "g.pt", map_location=lambda s, loc: seen.append((loc, s.nbytes())) or s)
    assert seen == [("cuda:0", 12)]
    with pytest.raises(CheckpointError, match="map_location returned int"):
        lf.load(tmp_path / "c.pt", map_location=lambda s, loc: 3)


def test_weights_only_false_and_legacy_format_are_refused(tmp_path):
    torch.save({"t": torch.ones(1)}, tmp_path / "c.pt")
    with pytest.raises(CheckpointError, match="weights_only=False"):
        lf.load(tmp_path / "c.pt", weights_only=False)
    torch.save({"t": torch.ones(1)}, tmp_path / "old.pt", _use_new_zipfile_serialization=False)
    with pytest.raises(CheckpointError, match="legacy"):
        lf.load(tmp_path / "old.pt")
    with pytest.raises(CheckpointError, match="format must be"):
        lf.save({}, tmp_path / "x", format="numpy")  # type: ignore[arg-type]


def test_model_zoo_round_trip(tmp_path):
    """A small ResNet built in torch saves its state_dict with torch.save; the same architecture in lazyflow
    loads it with model.load_state_dict(lf.load(path)) and gives torch's outputs (eager and compiled)."""

    def block(nn, c):
        return nn.Sequential(
            nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c, 3, padding=1)
        )

    def net(nn):
        return nn.Sequential(
            nn.Conv2d(3, 8, 3, stride=2, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            block(nn, 8),
            nn.MaxPool2d(2),
            block(nn, 8),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(8, 5),
        )

    torch.manual_seed(0)
    tnet = net(torch.nn)
    tnet.train()
    for _ in range(2):  # running statistics away from their defaults
        tnet(torch.randn(4, 3, 16, 16))
    tnet.eval()
    torch.save(tnet.state_dict(), tmp_path / "resnet.pth")
    lnet = net(lf.nn)
    result = lnet.load_state_dict(lf.load(tmp_path / "resnet.pth"))
    assert not result.missing_keys and not result.unexpected_keys
    lnet.eval()
    x = np.random.default_rng(1).standard_normal((2, 3, 16, 16)).astype(np.float32)
    want = tnet(torch.from_numpy(x)).detach().numpy()
    with lf.no_grad():
        np.testing.assert_allclose(lnet(lf.tensor(x)).numpy(), want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(lf.compile(lnet)(lf.tensor(x)).numpy(), want, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------------------------------- adversarial


class _Ref:
    """A storage reference in a hand-made pickle (persistent id as torch writes it)."""

    def __init__(self, key, numel, stype=torch.FloatStorage, location="cpu"):
        self.pid = ("storage", stype, key, location, numel)


class _Call:
    """``func(*args)`` in a hand-made pickle."""

    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        return obj.pid if isinstance(obj, _Ref) else None


def make_pt(path, obj, records=None, protocol=2):
    buf = io.BytesIO()
    _Pickler(buf, protocol=protocol).dump(obj)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", buf.getvalue())
        zf.writestr("archive/byteorder", "little")
        for k, v in (records or {}).items():
            zf.writestr(f"archive/data/{k}", v)
        zf.writestr("archive/version", "3\n")
    return path


def tensor_call(ref, offset, size, stride):
    return _Call(torch._utils._rebuild_tensor_v2, ref, offset, size, stride, False, collections.OrderedDict())


def test_hand_made_file_loads(tmp_path):
    """The helper writes what torch writes: a well-formed hand-made file loads (so the refusals below are
    refusals of the edits, not of the helper)."""
    data = np.arange(6, dtype=np.float32).tobytes()
    got = lf.load(make_pt(tmp_path / "ok.pt", {"t": tensor_call(_Ref("0", 6), 1, (2, 2), (2, 1))}, {"0": data}))
    assert got["t"].tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert torch.load(tmp_path / "ok.pt", weights_only=True)["t"].tolist() == [[1.0, 2.0], [3.0, 4.0]]


@pytest.mark.parametrize(
    "payload",
    [
        _Call(os.system, "touch PWNED"),
        _Call(eval, "1+1"),
        _Call(getattr, collections.OrderedDict, "fromkeys"),
        _Call(torch.load, "x.pt"),  # a gadget inside an allowed module
        _Call(torch._utils._import_dotted_name, "os.system"),
        _Call(pickle.loads, b"\x80\x04N."),  # a nested pickle
        _Call(collections.OrderedDict.fromkeys, [1]),  # a dotted name of an allowed class
        _Call(np.load, "x.npy"),
    ],
    ids=["os.system", "eval", "getattr", "torch.load", "import_dotted_name", "nested-pickle", "dotted", "np.load"],
)
def test_code_running_pickles_are_refused(tmp_path, payload, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_pt(tmp_path / "evil.pt", {"x": payload})
    with pytest.raises(CheckpointUnpicklingError, match="refused"):
        lf.load(tmp_path / "evil.pt")
    assert not (tmp_path / "PWNED").exists()


def test_reduce_payload_with_allowed_rebuild_but_bad_arguments(tmp_path):
    data = np.zeros(4, np.float32).tobytes()
    cases = {
        "negative stride": tensor_call(_Ref("0", 4), 0, (2,), (-1,)),
        "list size": _Call(torch._utils._rebuild_tensor_v2, _Ref("0", 4), 0, [2], (1,), False, None),
        "string offset": tensor_call(_Ref("0", 4), "0", (2,), (1,)),
        "not a storage": tensor_call("storage", 0, (2,), (1,)),
        "hooks": _Call(torch._utils._rebuild_tensor_v2, _Ref("0", 4), 0, (2,), (1,), False, {"h": 1}),
    }
    for call in cases.values():
        with pytest.raises(CheckpointUnpicklingError, match="refused"):
            lf.load(make_pt(tmp_path / "b.pt", {"t": call}, {"0": data}))


def test_storages_that_do_not_hold_the_tensor(tmp_path):
    data = np.zeros(4, np.float32).tobytes()
    with pytest.raises(CheckpointError, match="holds 16 bytes, the pickle claims 8 elements"):  # short storage
        lf.load(make_pt(tmp_path / "a.pt", {"t": tensor_call(_Ref("0", 8), 0, (8,), (1,))}, {"0": data}))
    with pytest.raises(CheckpointError, match="reaches element 5 of storage '0'"):  # tensor past its storage
        lf.load(make_pt(tmp_path / "b.pt", {"t": tensor_call(_Ref("0", 4), 2, (2,), (3,))}, {"0": data}))
    with pytest.raises(CheckpointError, match="points outside"):  # a record name that leaves data/
        lf.load(make_pt(tmp_path / "c.pt", {"t": tensor_call(_Ref("../data.pkl", 4), 0, (4,), (1,))}, {"0": data}))
    with pytest.raises(CheckpointError, match="no record"):
        lf.load(make_pt(tmp_path / "d.pt", {"t": tensor_call(_Ref("7", 4), 0, (4,), (1,))}, {"0": data}))
    with pytest.raises(CheckpointError, match="would expand storage '0'"):  # int64 product overflows; stride 0
        lf.load(make_pt(tmp_path / "f.pt", {"t": tensor_call(_Ref("0", 4), 0, (2**32, 2**32), (0, 0))}, {"0": data}))
    with pytest.raises(CheckpointUnpicklingError, match="refused"):  # dimensions no storage can hold
        lf.load(make_pt(tmp_path / "g.pt", {"t": tensor_call(_Ref("0", 4), 0, (0, 2**63), (1, 1))}, {"0": data}))
    with pytest.raises(CheckpointUnpicklingError, match="bad storage reference"):
        lf.load(make_pt(tmp_path / "e.pt", {"t": tensor_call(_Ref("0", -1.5), 0, (4,), (1,))}, {"0": data}))


def test_truncated_and_flipped_files_raise_or_load_unchanged(tmp_path):
    sd = {"w": torch.randn(8, 8), "b": torch.arange(8), "opt": {"lr": 0.5}}
    torch.save(sd, tmp_path / "c.pt")
    raw = (tmp_path / "c.pt").read_bytes()
    for n in sorted({0, 1, 3, 10, 100, len(raw) // 3, len(raw) // 2, len(raw) - 30, len(raw) - 1}):
        (tmp_path / "t.pt").write_bytes(raw[:n])
        with pytest.raises(CheckpointError):
            lf.load(tmp_path / "t.pt")
    guarded = set()  # the bytes of the pickle and of the tensor records: CRC-32 guards each
    with zipfile.ZipFile(tmp_path / "c.pt") as zf:
        for info in zf.infolist():
            if info.filename.endswith("data.pkl") or "/data/" in info.filename:
                h = info.header_offset
                start = (
                    h
                    + 30
                    + int.from_bytes(raw[h + 26 : h + 28], "little")
                    + int.from_bytes(raw[h + 28 : h + 30], "little")
                )
                guarded.update(range(start, start + info.file_size))
    rng = np.random.default_rng(0)
    refused = 0
    positions = list(rng.choice(len(raw), 60, replace=False)) + list(rng.choice(sorted(guarded), 40, replace=False))
    for pos in positions:
        bad = bytearray(raw)
        bad[pos] ^= 1 << int(rng.integers(8))
        (tmp_path / "f.pt").write_bytes(bytes(bad))
        try:
            got = lf.load(tmp_path / "f.pt")
        except CheckpointError:
            refused += 1
            continue
        assert pos not in guarded, f"a flipped bit at byte {pos} (pickle or tensor data) went unnoticed"
        # a flip that left the data intact (a zip timestamp, a padding byte): the same values come back
        np.testing.assert_array_equal(got["w"].numpy(), sd["w"].numpy())
        np.testing.assert_array_equal(got["b"].numpy(), sd["b"].numpy())
        assert got["opt"] == {"lr": 0.5}
    assert refused >= 40


@pytest.mark.parametrize("n", [32, 100_000], ids=["small-record", "large-record"])  # zipfile's read / direct read
def test_flipped_storage_byte_names_the_record(tmp_path, n):
    torch.save({"w": torch.randn(n)}, tmp_path / "c.pt")
    raw = bytearray((tmp_path / "c.pt").read_bytes())
    with zipfile.ZipFile(tmp_path / "c.pt") as zf:
        info = next(i for i in zf.infolist() if "/data/0" in i.filename)
    start = info.header_offset + 30 + len(info.filename) + int.from_bytes(raw[info.header_offset + 28 :][:2], "little")
    raw[start + 5] ^= 0x40
    (tmp_path / "f.pt").write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="record 'data/0'.*damaged"):
        lf.load(tmp_path / "f.pt")
    changed = torch.load(tmp_path / "f.pt", weights_only=True)["w"]  # torch does not check the CRC (docs claim)
    assert not torch.equal(changed, torch.load(tmp_path / "c.pt", weights_only=True)["w"])


def test_nothing_is_half_loaded_into_a_model(tmp_path):
    net = lf.nn.Linear(4, 2)
    before = {k: v.numpy().copy() for k, v in net.state_dict().items()}
    t = torch.nn.Linear(4, 2).state_dict()
    torch.save(t, tmp_path / "c.pt")
    raw = (tmp_path / "c.pt").read_bytes()
    (tmp_path / "t.pt").write_bytes(raw[: len(raw) - 200])
    with pytest.raises(CheckpointError):
        net.load_state_dict(lf.load(tmp_path / "t.pt"))
    for k, v in net.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])


def test_float8_and_big_endian_files(tmp_path):
    t = torch.tensor([0.5, -2.0, 448.0]).to(torch.float8_e4m3fn)
    torch.save({"f8": t}, tmp_path / "f8.pt")
    got = lf.load(tmp_path / "f8.pt")["f8"]
    assert isinstance(got, np.ndarray)  # no lazyflow float8 dtype: a numpy (ml_dtypes) array
    np.testing.assert_array_equal(got.astype(np.float32), t.float().numpy())
    # a file written on a big-endian machine: byteorder record "big", storages big-endian
    src = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3), "i": torch.tensor([1, 256, -3, 2**40])}
    torch.save(src, tmp_path / "le.pt")
    with zipfile.ZipFile(tmp_path / "le.pt") as zf:
        keys = {n: zf.read(n) for n in zf.namelist()}
    pkl = next(v for n, v in keys.items() if n.endswith("data.pkl"))
    dtypes = {}
    for name in keys:
        if "/data/" in name:
            dtypes[name] = np.float32 if len(keys[name]) == 24 else np.int64
    rewrite(
        tmp_path / "le.pt",
        tmp_path / "be.pt",
        lambda n, d: (
            b"big"
            if n.endswith("byteorder")
            else np.frombuffer(d, dtypes[n]).astype(np.dtype(dtypes[n]).newbyteorder(">")).tobytes()
            if n in dtypes
            else d
        ),
    )
    assert pkl  # the pickle is unchanged: only the record bytes and the byteorder record differ
    got = lf.load(tmp_path / "be.pt")
    np.testing.assert_array_equal(got["w"].numpy(), src["w"].numpy())
    np.testing.assert_array_equal(got["i"].numpy(), src["i"].numpy())


def test_loaded_tensors_do_not_alias_the_file(tmp_path):
    t = torch.randn(256, 256)  # a large record: read into lazyflow's own aligned buffer, wrapped by device_put
    torch.save({"t": t}, tmp_path / "c.pt")
    got = lf.load(tmp_path / "c.pt")
    raw = bytearray((tmp_path / "c.pt").read_bytes())
    pos = raw.find(t.numpy().tobytes()[:64])
    raw[pos : pos + 4096] = bytes(4096)
    with open(tmp_path / "c.pt", "r+b") as f:  # overwritten in place, as another process could
        f.write(raw)
    np.testing.assert_array_equal(got["t"].numpy(), t.numpy())
