"""Every way a value enters lazyflow copies it: the caller's memory is never shared.

On CPU ``jax.device_put`` wraps a 64-byte-aligned numpy buffer without copying (every torch tensor's ``.numpy()`` is
one), so each test keeps its source alive, mutates it after handing it over, and checks lazyflow still holds the
original values. The reference is a numpy copy taken before the hand-over.
"""

import numpy as np
import pytest
import torch

import lazyflow as lf
from lazyflow import nn


def _aligned(shape, fill=1.0, dtype=np.float32):
    """A 64-byte-aligned array (the case where jax.device_put aliases instead of copying)."""
    n = int(np.prod(shape))
    raw = np.empty(n * np.dtype(dtype).itemsize + 64, np.uint8)
    off = (-raw.ctypes.data) % 64
    a = raw[off : off + n * np.dtype(dtype).itemsize].view(dtype).reshape(shape)
    a[...] = np.arange(n, dtype=dtype).reshape(shape) + fill
    assert a.ctypes.data % 64 == 0
    return a


def _torch_view(shape):
    """A numpy view of a live torch tensor's memory (torch keeps mutating it in place)."""
    t = torch.arange(int(np.prod(shape)), dtype=torch.float32).reshape(shape) + 1
    return t, t.numpy()


SOURCES = {
    "aligned": lambda shape: (None, _aligned(shape)),
    "torch_numpy": _torch_view,
}


def _mutate(owner, arr):
    if owner is not None:
        owner.mul_(-3.0).add_(7.0)  # torch writes through its own tensor
    else:
        arr *= -3.0
        arr += 7.0


@pytest.fixture(params=sorted(SOURCES))
def source(request):
    return SOURCES[request.param]


@pytest.mark.parametrize(
    "make", [lf.tensor, lf.as_tensor, lf.from_numpy, lf.Tensor], ids=["tensor", "as_tensor", "from_numpy", "Tensor"]
)
def test_constructors_copy(source, make):
    owner, arr = source((4, 8))
    want = arr.copy()
    t = make(arr)
    _mutate(owner, arr)
    np.testing.assert_array_equal(t.numpy(), want)


def test_array_protocol_and_buffer_objects_copy():
    base = _aligned((16,))

    class ArrayLike:
        def __array__(self, dtype=None, copy=None):
            return base  # the same memory every time, as a memmap or a foreign array would be

    want = base.copy()
    t1 = lf.tensor(ArrayLike())
    t2 = lf.tensor(memoryview(base))
    base[:] = -1
    np.testing.assert_array_equal(t1.numpy(), want)
    np.testing.assert_array_equal(t2.numpy(), want)


@pytest.mark.parametrize("assign", [False, True])
def test_module_load_state_dict_copies(source, assign):
    m = nn.Linear(8, 4)
    owner_w, w = source((4, 8))
    owner_b, b = source((4,))
    want_w, want_b = w.copy(), b.copy()
    m.load_state_dict({"weight": w, "bias": b}, assign=assign)
    _mutate(owner_w, w)
    _mutate(owner_b, b)
    np.testing.assert_array_equal(m.weight.detach().numpy(), want_w)
    np.testing.assert_array_equal(m.bias.detach().numpy(), want_b)


def test_torch_twin_training_never_reaches_lazyflow():
    """The issue's scenario: load a torch model's numpy state, keep training the torch twin."""
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.BatchNorm1d(5), torch.nn.Linear(5, 2))
    lm = nn.Sequential(nn.Linear(6, 5), nn.BatchNorm1d(5), nn.Linear(5, 2))
    lm.load_state_dict({k: v.numpy() for k, v in tm.state_dict().items()})
    want = {k: v.detach().clone().numpy() for k, v in tm.state_dict().items()}
    opt = torch.optim.SGD(tm.parameters(), lr=0.5)
    for _ in range(3):
        opt.zero_grad()
        tm(torch.randn(8, 6)).square().sum().backward()
        opt.step()
    changed = [k for k, v in lm.state_dict().items() if not np.array_equal(v.numpy(), want[k])]
    assert changed == []


def test_optimizer_load_state_dict_copies(source):
    p = nn.Parameter(lf.ones(4, 8))
    opt = lf.optim.SGD([p], lr=0.1, momentum=0.9)
    p.grad = lf.ones(4, 8)
    opt.step()
    sd = opt.state_dict()
    owner, buf = source((4, 8))
    want = buf.copy()
    sd["state"][0]["momentum_buffer"] = buf
    opt.load_state_dict(sd)
    _mutate(owner, buf)
    np.testing.assert_array_equal(np.asarray(opt.state[p]["momentum_buffer"]), want)


def test_copy_and_setitem_from_numpy_copy(source):
    t1, t2, t3 = lf.zeros(4, 8), lf.zeros(4, 8), lf.zeros(4, 8)
    owner, arr = source((4, 8))
    want = arr.copy()
    t1.copy_(arr)
    t2[...] = arr
    t3[1:3] = arr[1:3]
    _mutate(owner, arr)
    np.testing.assert_array_equal(t1.numpy(), want)
    np.testing.assert_array_equal(t2.numpy(), want)
    np.testing.assert_array_equal(t3.numpy()[1:3], want[1:3])


def test_index_arrays_copy():
    x = lf.arange(10.0)
    idx = _aligned((3,), fill=0, dtype=np.int64)  # [0, 1, 2]
    y = x[idx]
    idx[:] = 9
    np.testing.assert_array_equal(y.numpy(), [0.0, 1.0, 2.0])


def test_dataloader_collation_copies():
    data = [_aligned((3,), fill=i) for i in range(4)]
    want = np.stack([d.copy() for d in data])

    class DS(lf.utils.data.Dataset):
        def __len__(self):
            return len(data)

        def __getitem__(self, i):
            return data[i]

    batches = list(lf.utils.data.DataLoader(DS(), batch_size=4))
    single = list(lf.utils.data.DataLoader(DS(), batch_size=None))
    for d in data:
        d[:] = -5
    np.testing.assert_array_equal(batches[0].numpy(), want)
    np.testing.assert_array_equal(np.stack([s.numpy() for s in single]), want)


def test_save_snapshots_numpy_input(tmp_path, source):
    owner, arr = source((4, 8))
    want = arr.copy()
    lf.save({"w": arr, "t": lf.tensor(arr)}, tmp_path / "ck")
    _mutate(owner, arr)
    ck = lf.load(tmp_path / "ck")
    np.testing.assert_array_equal(np.asarray(ck["w"]), want)
    np.testing.assert_array_equal(ck["t"].numpy(), want)


def test_loaded_tensors_are_independent(tmp_path):
    lf.save({"a": lf.arange(6.0)}, tmp_path / "ck")
    a1 = lf.load(tmp_path / "ck")["a"]
    a2 = lf.load(tmp_path / "ck")["a"]
    a1.add_(100.0)  # in place: may donate a1's buffer, must never show in a2
    np.testing.assert_array_equal(a2.numpy(), np.arange(6.0))


def test_from_jax_then_inplace_never_deletes_the_callers_array():
    import jax.numpy as jnp

    src = jnp.arange(4.0)
    t = lf.from_jax(src)
    t.add_(1.0)
    np.testing.assert_array_equal(np.asarray(src), [0.0, 1.0, 2.0, 3.0])
    np.testing.assert_array_equal(t.numpy(), [1.0, 2.0, 3.0, 4.0])


def test_jax_hands_out_the_live_buffer_donating_it_deletes_the_tensors():
    """Tensor.jax()'s docstring: no copy, so a donating jax.jit deletes the tensor's buffer; a copy is safe."""
    import jax
    import jax.numpy as jnp

    step = jax.jit(lambda a: a * 2, donate_argnums=0)
    t = lf.tensor([1.0, 2.0])
    assert t.jax() is t.jax()  # the same array object: no copy
    step(jnp.array(t.jax(), copy=True))
    assert t.tolist() == [1.0, 2.0]
    step(t.jax())
    assert t.jax().is_deleted()
    with pytest.raises(RuntimeError, match="deleted"):
        t.tolist()
