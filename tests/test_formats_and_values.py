"""torch's values and keywords a model file uses without thinking: constants (``torch.pi``, ``torch.inf``), memory
formats (``model.to(memory_format=torch.channels_last)``), layouts, ``pin_memory=``, Tensor properties (``x.H``,
``x.nbytes``, ``x.is_cpu``...), ``Module.to(complex dtype)`` and ``Tensor.to(copy=True)``. Reference: torch, called
the same way (errors: the same calls fail in both, with the matching built-in class)."""

import math
import pickle
import warnings

import numpy as np
import pytest
import torch

import lazyflow as lf
from lazyflow._core.errors import ArgumentError, DeviceError, NotSupportedError, ShapeError

FORMATS = ["contiguous_format", "channels_last", "channels_last_3d", "preserve_format"]
SHAPES = [(2, 3), (2, 3, 4, 5), (2, 1, 4, 5), (1, 3, 1, 1), (2, 3, 4, 5, 6), (2, 1, 1, 5, 6)]


def _outcome(fn):
    """``("ok", value)`` or ``("error", the built-in classes it is an instance of)``."""
    try:
        return "ok", fn()
    except Exception as e:
        return "error", {c for c in (TypeError, ValueError, RuntimeError) if isinstance(e, c)}


def test_constants_are_torchs():
    assert (lf.pi, lf.e, lf.inf) == (torch.pi, torch.e, torch.inf)
    assert math.isnan(lf.nan) and lf.newaxis is torch.newaxis is None
    x = np.arange(6.0).reshape(2, 3)
    assert tuple(lf.tensor(x)[:, lf.newaxis].shape) == tuple(torch.tensor(x)[:, torch.newaxis].shape) == (2, 1, 3)
    assert lf.tensor([lf.inf]).isinf().item() and lf.full((1,), -lf.inf).item() == -math.inf


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_is_contiguous_in_a_format_answers_as_torch_for_a_fresh_tensor(shape, fmt):
    """A fresh tensor has row-major strides in both libraries: the answer for each format is torch's."""
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    ours = lf.tensor(x).is_contiguous(memory_format=getattr(lf, fmt))
    assert ours == torch.tensor(x).is_contiguous(memory_format=getattr(torch, fmt))


CALLS = {  # name -> (lazyflow call, torch call) on a tensor x of the given shape and a format
    "to": (lambda m, x, f: x.to(memory_format=f), None),
    "contiguous": (lambda m, x, f: x.contiguous(memory_format=f), None),
    "clone": (lambda m, x, f: x.clone(memory_format=f), None),
    "zeros_like": (lambda m, x, f: m.zeros_like(x, memory_format=f), None),
    "randn_like": (lambda m, x, f: m.randn_like(x, memory_format=f), None),
    "empty": (lambda m, x, f: m.empty(*x.shape, memory_format=f), None),
}


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 4, 5), (2, 3, 4, 5, 6)])
@pytest.mark.parametrize("fmt", FORMATS)
def test_memory_format_keywords_fail_where_torchs_fail_and_change_no_value(call, shape, fmt):
    fn = CALLS[call][0]
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    ours = _outcome(lambda: fn(lf, lf.tensor(x), getattr(lf, fmt)))
    theirs = _outcome(lambda: fn(torch, torch.tensor(x), getattr(torch, fmt)))
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] == "error":
        assert RuntimeError in ours[1] and ours[1] >= theirs[1] - {TypeError}
        return
    assert tuple(ours[1].shape) == tuple(theirs[1].shape)
    if call in ("to", "contiguous", "clone"):  # the same values (torch's are restrided, lazyflow's unchanged)
        np.testing.assert_array_equal(ours[1].numpy(), theirs[1].numpy())


@pytest.mark.parametrize("bad", [3, "channels_last", lf.strided])
def test_a_memory_format_that_is_not_one_is_a_type_error_in_both(bad):
    x = lf.zeros(2, 3, 4, 5)
    for call in (lambda: x.to(memory_format=bad), lambda: lf.empty_like(x, memory_format=bad)):
        with pytest.raises(ArgumentError, match="memory_format must be a lazyflow memory format"):
            call()
    with pytest.raises(TypeError):
        torch.zeros(2, 3, 4, 5).to(memory_format=3)


def test_formats_and_layouts_are_singletons_that_pickle_to_themselves():
    for v in (lf.channels_last, lf.contiguous_format, lf.channels_last_3d, lf.preserve_format, lf.strided):
        assert pickle.loads(pickle.dumps(v)) is v
    assert isinstance(lf.channels_last, lf.memory_format) and isinstance(lf.strided, lf.layout)
    assert repr(lf.channels_last) == "lazyflow.channels_last"


@pytest.mark.parametrize(
    "call",
    [
        lambda m, kw: m.zeros(2, 3, **kw),
        lambda m, kw: m.ones(2, **kw),
        lambda m, kw: m.full((2,), 1.0, **kw),
        lambda m, kw: m.arange(4, **kw),
        lambda m, kw: m.linspace(0, 1, 3, **kw),
        lambda m, kw: m.eye(2, **kw),
        lambda m, kw: m.rand(2, **kw),
        lambda m, kw: m.randint(0, 5, (3,), **kw),
        lambda m, kw: m.zeros_like(m.ones(2), **kw),
        lambda m, kw: m.hann_window(4, **kw),
        lambda m, kw: m.logspace(0, 1, 3, **kw),
        lambda m, kw: m.tril_indices(3, 3, **kw),
    ],
)
def test_factories_take_the_strided_layout_and_refuse_others(call):
    assert tuple(call(lf, {"layout": lf.strided}).shape) == tuple(call(torch, {"layout": torch.strided}).shape)
    assert call(lf, {"layout": lf.strided}).layout is lf.strided
    with pytest.raises(NotSupportedError, match="dense"):
        call(lf, {"layout": "sparse_coo"})
    with pytest.raises(ArgumentError, match="layout must be lf.strided"):
        call(lf, {"layout": 7})


@pytest.mark.skipif(lf.accelerator.is_available(), reason="answers as torch's CPU build: a machine without a GPU")
@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.tensor([1.0], pin_memory=True),
        lambda m: m.empty(2, pin_memory=True),
        lambda m: m.rand(2, pin_memory=True),
        lambda m: m.randn(2, pin_memory=True),
        lambda m: m.randperm(3, pin_memory=True),
        lambda m: m.ones(2).pin_memory(),
    ],
)
def test_pin_memory_without_an_accelerator_fails_as_in_torchs_cpu_build(call):
    with pytest.raises(RuntimeError):
        call(torch)
    with pytest.raises(DeviceError, match="accelerator"):
        call(lf)
    assert lf.ones(2).is_pinned() is torch.ones(2).is_pinned() is False
    assert lf.tensor([1.0], pin_memory=False).shape == (1,)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int8", "int64", "bool", "complex64"])
def test_size_properties_are_torchs(dtype):
    x = np.arange(24).reshape(2, 3, 4)
    t, ours = torch.tensor(x).to(getattr(torch, dtype)), lf.tensor(x).to(getattr(lf, dtype))
    assert (ours.itemsize, ours.nbytes) == (t.itemsize, t.nbytes)
    assert ours.is_cpu == t.is_cpu and ours.layout is lf.strided and t.layout is torch.strided


def test_conjugate_transposes_are_torchs():
    rng = np.random.default_rng(2)
    z = rng.standard_normal((2, 3, 4)) + 1j * rng.standard_normal((2, 3, 4))
    ours, theirs = lf.tensor(z), torch.tensor(z)
    np.testing.assert_array_equal(ours.mH.numpy(), theirs.mH.resolve_conj().numpy())
    np.testing.assert_array_equal(ours[0].H.numpy(), theirs[0].H.resolve_conj().numpy())
    r = rng.standard_normal((3, 2)).astype(np.float32)
    np.testing.assert_array_equal(lf.tensor(r).H.numpy(), torch.tensor(r).H.resolve_conj().numpy())
    for prop, x in (("H", z), ("H", z[0, 0]), ("mH", z[0, 0])):
        with pytest.raises(RuntimeError):
            getattr(torch.tensor(x), prop)
        with pytest.raises(ShapeError, match=f"tensor.{prop} is only supported"):
            getattr(lf.tensor(x), prop)


def test_output_nr_name_volatile_and_kind_flags_are_torchs():
    a = np.arange(4.0)
    ours = lf.tensor(a, requires_grad=True).chunk(2)
    theirs = torch.tensor(a, requires_grad=True).chunk(2)
    assert [t.output_nr for t in ours] == [t.output_nr for t in theirs] == [0, 1]
    leaf, tleaf = lf.tensor(a), torch.tensor(a)
    assert leaf.output_nr == tleaf.output_nr == 0 and leaf.name is tleaf.name is None
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert leaf.volatile is tleaf.volatile is False
    assert len(w) == 2 and str(w[0].message) == str(w[1].message)
    for flag in ("is_sparse", "is_sparse_csr", "is_quantized", "is_mkldnn", "is_nested", "is_meta", "is_xla"):
        assert getattr(leaf, flag) is getattr(tleaf, flag) is False


def test_module_to_complex_converts_floats_and_complex_like_torch():
    rng = np.random.default_rng(3)
    w, b = rng.standard_normal((3, 2)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    ours, theirs = lf.nn.Linear(2, 3), torch.nn.Linear(2, 3)
    for m, lib in ((ours, lf), (theirs, torch)):
        with lib.no_grad():
            m.weight.copy_(lib.tensor(w))
            m.bias.copy_(lib.tensor(b))
        m.register_buffer("steps", lib.ones(2, dtype=lib.int64))
    ours.to(lf.complex64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch: "complex modules are a new feature"
        theirs.to(torch.complex64)
    assert {k: str(v.dtype).split(".")[1] for k, v in ours.state_dict().items()} == {
        k: str(v.dtype).split(".")[1] for k, v in theirs.state_dict().items()
    }
    x = (rng.standard_normal((4, 2)) + 1j * rng.standard_normal((4, 2))).astype(np.complex64)
    lo, to = ours(lf.tensor(x)), theirs(torch.tensor(x))
    np.testing.assert_allclose(lo.detach().numpy(), to.detach().numpy(), rtol=1e-5, atol=1e-6)
    lo.abs().sum().backward()
    to.abs().sum().backward()
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-4, atol=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that the imaginary part is discarded
        theirs.to(torch.float32)
    ours.to(lf.float32)
    np.testing.assert_array_equal(ours.weight.detach().numpy(), theirs.weight.detach().numpy())
    assert ours.weight.dtype is lf.float32 and ours.steps.dtype is lf.int64


def test_module_to_memory_format_and_bad_dtypes_as_torch():
    conv, tconv = lf.nn.Conv2d(3, 4, 3), torch.nn.Conv2d(3, 4, 3)
    before = conv.weight.detach().numpy().copy()
    assert conv.to(memory_format=lf.channels_last) is conv
    tconv.to(memory_format=torch.channels_last)
    np.testing.assert_array_equal(conv.weight.detach().numpy(), before)
    lf.nn.Linear(2, 2).to(memory_format=lf.channels_last)  # no 4-D tensor: nothing to do, as in torch
    for lib in (lf, torch):
        with pytest.raises(TypeError, match="floating point or complex"):
            lib.nn.Linear(2, 2).to(lib.int32)
    with pytest.raises(ArgumentError):
        conv.to(memory_format="channels_last")


def test_to_copy_true_returns_a_tensor_of_its_own():
    for lib in (lf, torch):
        x = lib.ones(3)
        same, copy = x.to(lib.float32), x.to(lib.float32, copy=True)
        copy.add_(1)
        assert same is x and x.sum().item() == 3.0 and copy.sum().item() == 6.0
