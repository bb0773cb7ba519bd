"""In-place updates: values against numpy, buffer donation versus copying when the buffer is shared,
version counters, the autograd rules for in-place ops, and gradients through in-place ops on non-leaves
against ``jax.grad`` of the equivalent pure function."""

import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lazyflow as lf

RNG = np.random.default_rng(0)


def _arr(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# --------------------------------------------------------------------------- values against numpy


def _np_index_add(a, dim, idx, src, alpha):
    out = a.copy()
    for k, i in enumerate(idx):
        sl = [slice(None)] * a.ndim
        sl[dim] = i
        ssl = [slice(None)] * a.ndim
        ssl[dim] = k
        out[tuple(sl)] += alpha * src[tuple(ssl)]
    return out


A = _arr(3, 4)
B = _arr(3, 4)
ROW = _arr(4)
MASK = A > 0
IDX = np.array([2, 0, 2])
SRC = _arr(3, 4)

INPLACE_CASES = [
    ("add_ tensor", lambda t: t.add_(lf.tensor(B)), A + B),
    ("add_ alpha", lambda t: t.add_(lf.tensor(B), alpha=2.5), A + 2.5 * B),
    ("add_ scalar", lambda t: t.add_(3.0), A + 3.0),
    ("add_ broadcast row", lambda t: t.add_(lf.tensor(ROW)), A + ROW),
    ("sub_ tensor", lambda t: t.sub_(lf.tensor(B)), A - B),
    ("sub_ alpha", lambda t: t.sub_(lf.tensor(B), alpha=0.5), A - 0.5 * B),
    ("mul_ tensor", lambda t: t.mul_(lf.tensor(B)), A * B),
    ("mul_ int scalar", lambda t: t.mul_(3), A * 3),
    ("div_ tensor", lambda t: t.div_(lf.tensor(B)), A / B),
    ("div_ scalar", lambda t: t.div_(4.0), A / 4.0),
    ("zero_", lambda t: t.zero_(), np.zeros_like(A)),
    ("fill_", lambda t: t.fill_(1.25), np.full_like(A, 1.25)),
    ("copy_", lambda t: t.copy_(lf.tensor(B)), B),
    ("copy_ broadcast", lambda t: t.copy_(lf.tensor(ROW)), np.broadcast_to(ROW, A.shape)),
    ("clamp_", lambda t: t.clamp_(min=-0.5, max=0.5), np.clip(A, -0.5, 0.5)),
    ("clamp_ min only", lambda t: t.clamp_(min=0.1), np.maximum(A, 0.1)),
    ("masked_fill_", lambda t: t.masked_fill_(lf.tensor(MASK), -7.0), np.where(MASK, -7.0, A)),
    ("index_add_", lambda t: t.index_add_(0, lf.tensor(IDX), lf.tensor(SRC)), _np_index_add(A, 0, IDX, SRC, 1)),
    (
        "index_add_ alpha",
        lambda t: t.index_add_(0, lf.tensor(IDX), lf.tensor(SRC), alpha=-2),
        _np_index_add(A, 0, IDX, SRC, -2),
    ),
]


@pytest.mark.parametrize("name,fn,expected", INPLACE_CASES, ids=[c[0] for c in INPLACE_CASES])
def test_inplace_values_match_numpy(name, fn, expected):
    t = lf.tensor(A)
    out = fn(t)
    assert out is t
    assert t.dtype is lf.float32 and t.shape == A.shape
    np.testing.assert_allclose(t.numpy(), expected.astype(np.float32), rtol=1e-6, atol=1e-6)


SETITEM_CASES = [
    ("int", lambda v: v.__setitem__(1, lf.tensor(ROW)), (1,), ROW),
    ("negative int", lambda v: v.__setitem__(-1, 2.0), (-1,), 2.0),
    ("int,int", lambda v: v.__setitem__((2, 3), -1.5), (2, 3), -1.5),
    ("slice", lambda v: v.__setitem__(slice(1, 3), lf.tensor(B[:2])), (slice(1, 3),), B[:2]),
    ("step slice", lambda v: v.__setitem__((slice(None), slice(0, 4, 2)), 9.0), (slice(None), slice(0, 4, 2)), 9.0),
    ("column broadcast", lambda v: v.__setitem__((slice(None), 1), lf.tensor(B[:, 0])), (slice(None), 1), B[:, 0]),
    ("ellipsis", lambda v: v.__setitem__((Ellipsis, 0), 4.0), (Ellipsis, 0), 4.0),
    ("bool mask", lambda v: v.__setitem__(lf.tensor(MASK), 0.0), (MASK,), 0.0),
    ("int list", lambda v: v.__setitem__([0, 2], lf.tensor(ROW)), ([0, 2],), ROW),
]


@pytest.mark.parametrize("name,fn,index,value", SETITEM_CASES, ids=[c[0] for c in SETITEM_CASES])
def test_setitem_matches_numpy(name, fn, index, value):
    v = lf.tensor(A)
    fn(v)
    expected = A.copy()
    expected[index if len(index) > 1 else index[0]] = value
    np.testing.assert_allclose(v.numpy(), expected, rtol=1e-6)


def test_inplace_result_dtype_stays_the_targets():
    t = lf.tensor(np.arange(4, dtype=np.int32))
    t.add_(lf.tensor(np.ones(4, np.int64)))
    assert t.dtype is lf.int32
    np.testing.assert_array_equal(t.numpy(), np.arange(4) + 1)
    f = lf.tensor(A)
    f.mul_(lf.tensor(np.full(A.shape, 2, np.int64)))
    assert f.dtype is lf.float32
    np.testing.assert_allclose(f.numpy(), A * 2, rtol=1e-6)


def test_inplace_float_into_int_target_raises_dtype_error():
    t = lf.tensor(np.arange(4, dtype=np.int64))
    with pytest.raises(lf.DTypeError, match="add"):
        t.add_(1.5)
    np.testing.assert_array_equal(t.numpy(), np.arange(4))


def test_inplace_cannot_broadcast_the_target():
    t = lf.tensor(ROW)
    with pytest.raises(lf.ShapeError):
        t.add_(lf.tensor(A))
    np.testing.assert_array_equal(t.numpy(), ROW)


# --------------------------------------------------------------------------- donation versus copying

N = 4096


def test_sole_owner_is_updated_in_place():
    t = lf.zeros(N)
    t.add_(1.0)  # compile the donating kernel first
    ptr = t.data_ptr()
    for _ in range(3):
        t.add_(1.0)
    assert t.data_ptr() == ptr, "a tensor owning its buffer alone should be updated in place (donated)"
    v = lf.zeros(64, 8)
    ones = lf.ones(8)
    v[0] = ones
    ptr = v.data_ptr()
    for i in range(64):
        v[i] = ones
    assert v.data_ptr() == ptr
    np.testing.assert_array_equal(t.numpy(), np.full(N, 4.0, np.float32))
    np.testing.assert_array_equal(v.numpy(), np.ones((64, 8), np.float32))


def _alias_detach(t):
    return t.detach()


def _alias_jax(t):
    return t.jax()


def _alias_data(t):
    return t.data


def _alias_numpy_view(t):
    return np.asarray(t.jax())


def _alias_from_jax(t):
    return lf.from_jax(t.jax())


def _alias_in_list(t):
    return [t.jax()]


ALIASES = [_alias_detach, _alias_jax, _alias_data, _alias_numpy_view, _alias_from_jax, _alias_in_list]

UPDATES = [
    ("add_", lambda t: t.add_(1.0)),
    ("mul_", lambda t: t.mul_(3.0)),
    ("setitem int", lambda t: t.__setitem__(0, 5.0)),
    ("setitem slice", lambda t: t.__setitem__(slice(2, 6), -1.0)),
    ("fill_", lambda t: t.fill_(8.0)),
    ("clamp_", lambda t: t.clamp_(max=0.0)),
]


def _read(alias):
    if isinstance(alias, list):
        alias = alias[0]
    return np.array(alias)


# aliases torch makes share the storage (detach(), .data): they see the update; the rest hold the old buffer
_SHARES_STORAGE = {_alias_detach, _alias_data}


@pytest.mark.parametrize("update", UPDATES, ids=[u[0] for u in UPDATES])
@pytest.mark.parametrize("make_alias", ALIASES, ids=[a.__name__[7:] for a in ALIASES])
def test_shared_buffer_is_copied_not_donated(make_alias, update):
    import torch

    base = np.arange(16, dtype=np.float32) + 1
    t = lf.tensor(base)
    update[1](lf.tensor(base))  # warm the donating variant: the shared case must not hit it
    alias = make_alias(t)
    update[1](t)
    got = _read(alias)  # raises "Array has been deleted" if the alias's buffer was donated
    if make_alias in _SHARES_STORAGE:  # torch as the reference: the alias shows the update
        tt = torch.tensor(base)
        ta = make_alias(tt)
        update[1](tt)
        np.testing.assert_array_equal(got, ta.numpy())
    else:
        np.testing.assert_array_equal(got, base)
    expected = lf.tensor(base)
    update[1](expected)
    np.testing.assert_array_equal(t.numpy(), expected.numpy())


def test_detached_alias_shares_storage_both_ways_and_is_never_deleted():
    """detach() shares storage as in torch: updates of either are seen through both, and the donating in-place
    kernels never delete the buffer the alias holds."""
    t = lf.ones(N)
    d = t.detach()
    for _ in range(5):
        t.add_(1.0)
    assert not d.jax().is_deleted()
    np.testing.assert_array_equal(d.numpy(), np.full(N, 6.0, np.float32))
    d.mul_(4.0)  # and the other direction
    np.testing.assert_array_equal(t.numpy(), np.full(N, 24.0, np.float32))
    held = t.jax()  # a raw jax array is a value, not a view: it keeps what it had
    t.add_(1.0)
    np.testing.assert_array_equal(np.asarray(held), np.full(N, 24.0, np.float32))
    np.testing.assert_array_equal(d.numpy(), np.full(N, 25.0, np.float32))


def test_user_held_jax_array_is_not_deleted_by_from_jax_tensor_update():
    a = jnp.arange(8.0, dtype=jnp.float32)
    t = lf.from_jax(a)
    t.add_(1.0)
    assert not a.is_deleted()
    np.testing.assert_array_equal(np.asarray(a), np.arange(8.0))
    np.testing.assert_array_equal(t.numpy(), np.arange(8.0) + 1)


_PERM = [1, 0, 3, 2]

# (name, op(target, operand), numpy reference of op(a, a))
TARGET_TWICE = [
    ("add_", lambda t, s: t.add_(s), lambda a: a + a),
    ("sub_ alpha", lambda t, s: t.sub_(s, alpha=0.5), lambda a: a - 0.5 * a),
    ("mul_", lambda t, s: t.mul_(s), lambda a: a * a),
    ("div_", lambda t, s: t.div_(s), lambda a: a / a),
    ("copy_", lambda t, s: t.copy_(s), lambda a: a),
    ("index_add_", lambda t, s: t.index_add_(0, lf.tensor(_PERM), s), lambda a: a + a[np.argsort(_PERM)]),
    ("setitem slice", lambda t, s: t.__setitem__(slice(0, 2), s[2:]), lambda a: np.r_[a[2:], a[2:]]),
]


@pytest.mark.parametrize("name,fn,ref", TARGET_TWICE, ids=[c[0] for c in TARGET_TWICE])
def test_target_also_passed_as_operand(name, fn, ref):
    """``t.op_(t)``: the target's buffer is an operand too, so it cannot be donated -- also when a donating
    kernel for the same signature is already cached (``t.op_(u)`` with ``u`` of ``t``'s shape and dtype)."""
    base = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    for first in ("self", "other", "self"):
        t = lf.tensor(base)
        if first == "other":
            fn(t, lf.tensor(base))
            expected = ref(base)
        else:
            fn(t, t)
            expected = ref(base)
        np.testing.assert_allclose(t.numpy(), expected, rtol=1e-6)


# --------------------------------------------------------------------------- version counters


def test_version_counter_bumps_once_per_inplace_op():
    t = lf.zeros(3)
    assert t._version == 0
    t.add_(1.0)
    t.mul_(2.0)
    t[0] = 3.0
    t.zero_()
    assert t._version == 4
    d = t.detach()
    u = t + 1  # out-of-place ops leave the counter alone
    assert t._version == 4 and u._version == 0
    d.add_(1.0)  # detach() shares storage and, as in torch, the counter: a write through it is a write to t
    import torch

    tt = torch.zeros(3)
    tt.add_(1.0), tt.mul_(2.0), tt.__setitem__(0, 3.0), tt.zero_()
    tt.detach().add_(1.0)
    assert t._version == tt._version == 5


# --------------------------------------------------------------------------- autograd rules


def test_inplace_on_leaf_requiring_grad_raises():
    w = lf.ones(3, requires_grad=True)
    for fn in (
        lambda: w.add_(1.0),
        lambda: w.mul_(2.0),
        lambda: w.__setitem__(0, 2.0),
        lambda: w.zero_(),
        lambda: w.copy_(lf.zeros(3)),
        lambda: w.clamp_(min=0.0),
    ):
        with pytest.raises(lf.AutogradError, match="leaf"):
            fn()
    assert issubclass(lf.AutogradError, RuntimeError)
    np.testing.assert_array_equal(w.detach().numpy(), np.ones(3))
    assert w._version == 0


def test_inplace_on_leaf_under_no_grad_is_allowed():
    w = lf.ones(3, requires_grad=True)
    with lf.no_grad():
        w.sub_(lf.tensor([0.5, 1.0, 1.5]))
        w[2] = 7.0
    assert w.requires_grad and w.is_leaf and w.grad_fn is None
    np.testing.assert_array_equal(w.detach().numpy(), [0.5, 0.0, 7.0])
    (w * w).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [1.0, 0.0, 14.0])


def test_modifying_a_saved_tensor_then_backward_raises():
    x = lf.tensor([1.0, 2.0, 3.0], requires_grad=True)
    h = x * 2
    y = (h * h).sum()  # mul saves h
    h.add_(1.0)
    with pytest.raises(lf.AutogradError, match="in-place"):
        y.backward()


def test_modifying_a_saved_leaf_under_no_grad_then_backward_raises_not_deleted():
    # an optimizer-style update of a leaf saved by a pending graph: the update donates the leaf's buffer,
    # so backward must report the in-place modification (not JAX's "Array has been deleted")
    x = lf.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x * x).sum()
    with lf.no_grad():
        x.add_(1.0)
    with pytest.raises(lf.AutogradError, match="in-place"):
        y.backward()


def test_modifying_a_saved_plain_operand_keeps_the_value_seen_by_forward():
    # documented difference from torch (which raises here): an operand that does not require grad is saved by
    # value, so the gradient uses the value the forward saw, and the in-place update copies instead of donating
    w = lf.tensor([1.0, 2.0], requires_grad=True)
    t = lf.tensor([3.0, 4.0])
    y = (t * w).sum()  # the gradient for w needs t
    t.mul_(2.0)
    y.backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(t.numpy(), [6.0, 8.0])


def test_modifying_a_saved_grad_requiring_operand_then_backward_raises():
    w = lf.tensor([1.0, 2.0], requires_grad=True)
    h = w * 1.0
    y = (h * h).sum()  # saves h, which requires grad
    h.mul_(2.0)
    with pytest.raises(lf.AutogradError, match="in-place"):
        y.backward()


X0 = np.array([0.3, -1.2, 0.8, 2.0], np.float64)
Y0 = np.array([1.5, 0.4, -0.7, 0.9], np.float64)
M0 = np.array([True, False, True, False])

# each case: (lazyflow function of x, y with in-place ops on a non-leaf, the same computation in pure jnp)
REBASE_CASES = [
    ("mul_(self)", lambda x, y: _do(x * 2, lambda h: h.mul_(h)).sum(), lambda x, y: ((2 * x) * (2 * x)).sum()),
    (
        "add_ then mul_",
        lambda x, y: _do(x.sin(), lambda h: h.add_(y, alpha=2.0), lambda h: h.mul_(x)).sum(),
        lambda x, y: ((jnp.sin(x) + 2.0 * y) * x).sum(),
    ),
    (
        "sub_ div_ square",
        lambda x, y: (_do(x.exp(), lambda h: h.sub_(y), lambda h: h.div_(3.0)) ** 2).sum(),
        lambda x, y: (((jnp.exp(x) - y) / 3.0) ** 2).sum(),
    ),
    (
        "clamp_",
        lambda x, y: (_do(x * y, lambda h: h.clamp_(min=-0.3, max=0.5)) * x).sum(),
        lambda x, y: (jnp.clip(x * y, -0.3, 0.5) * x).sum(),
    ),
    (
        "masked_fill_",
        lambda x, y: (_do(x * 1.0, lambda h: h.masked_fill_(lf.tensor(M0), 0.0)) * y).sum(),
        lambda x, y: (jnp.where(M0, 0.0, x) * y).sum(),
    ),
    (
        "setitem from y",
        lambda x, y: (_do(x * 1.0, lambda h: h.__setitem__(1, y[0] * 3.0)) ** 2).sum(),
        lambda x, y: (x.at[1].set(y[0] * 3.0) ** 2).sum(),
    ),
    (
        "setitem slice",
        lambda x, y: (_do(x.tanh(), lambda h: h.__setitem__(slice(0, 2), y[2:])) * x).sum(),
        lambda x, y: (jnp.tanh(x).at[0:2].set(y[2:]) * x).sum(),
    ),
    (
        "index_add_",
        lambda x, y: (_do(x * x, lambda h: h.index_add_(0, lf.tensor([3, 3, 0, 1]), y)) ** 2).sum(),
        lambda x, y: ((x * x).at[jnp.array([3, 3, 0, 1])].add(y) ** 2).sum(),
    ),
    (
        "copy_ into non-leaf",
        lambda x, y: (_do(x * 2.0, lambda h: h.copy_(y.cos())) * x).sum(),
        lambda x, y: (jnp.cos(y) * x).sum(),
    ),
    (
        "mul_ twice by y",
        lambda x, y: (_do(x.sin(), lambda h: h.mul_(y), lambda h: h.mul_(y)) * x).sum(),
        lambda x, y: (jnp.sin(x) * y * y * x).sum(),
    ),
]


def _do(h, *ops):
    for f in ops:
        f(h)
    return h


@pytest.mark.parametrize("name,lf_fn,jnp_fn", REBASE_CASES, ids=[c[0] for c in REBASE_CASES])
def test_inplace_on_non_leaf_gradients_match_jax(name, lf_fn, jnp_fn):
    x = lf.tensor(X0, requires_grad=True)
    y = lf.tensor(Y0, requires_grad=True)
    loss = lf_fn(x, y)
    loss.backward()
    gx, gy = jax.grad(jnp_fn, argnums=(0, 1))(jnp.asarray(X0), jnp.asarray(Y0))
    np.testing.assert_allclose(loss.item(), float(jnp_fn(jnp.asarray(X0), jnp.asarray(Y0))), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), np.asarray(gx), rtol=1e-10, atol=1e-12)
    if y.grad is None:  # y unused: torch leaves its .grad None too
        np.testing.assert_array_equal(np.asarray(gy), 0.0)
    else:
        np.testing.assert_allclose(y.grad.numpy(), np.asarray(gy), rtol=1e-10, atol=1e-12)


def test_clone_then_update_the_source_in_place():
    """torch's clone saves nothing for backward, so updating the cloned tensor afterwards is legal (lazyflow's
    own error message recommends clone for exactly this); the gradient is the pure function's."""
    x = lf.tensor(X0, requires_grad=True)
    y = lf.tensor(Y0, requires_grad=True)
    h = x * 2
    g = h.clone()
    h.add_(y)
    (g * h).sum().backward()
    gx, gy = jax.grad(lambda x, y: ((x * 2) * (x * 2 + y)).sum(), argnums=(0, 1))(jnp.asarray(X0), jnp.asarray(Y0))
    np.testing.assert_allclose(x.grad.numpy(), np.asarray(gx), rtol=1e-12)
    np.testing.assert_allclose(y.grad.numpy(), np.asarray(gy), rtol=1e-12)


def test_inplace_on_an_output_of_a_multi_output_op():
    x = lf.tensor(X0, requires_grad=True)
    a, b = x.split(2)
    a.mul_(3.0)
    v, _ = (x * x).max(dim=0, keepdim=True)
    v.add_(b.sum())
    loss = (a * a).sum() + (b * 2.0).sum() + v.sum()

    def ref(x):
        a, b = x[:2] * 3.0, x[2:]
        v = (x * x).max(axis=0, keepdims=True) + b.sum()
        return (a * a).sum() + (b * 2.0).sum() + v.sum()

    loss.backward()
    np.testing.assert_allclose(loss.item(), float(ref(jnp.asarray(X0))), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), np.asarray(jax.grad(ref)(jnp.asarray(X0))), rtol=1e-12)


# ops whose backward needs no operand values (torch saves nothing for them): reading h through one of them, then
# updating h in place, is legal; the read keeps the pre-update value (lazyflow's views are copies, see README)
READ_THEN_UPDATE = [
    ("clone", lambda h: h.clone(), lambda h: h),
    ("add scalar", lambda h: h + 1.0, lambda h: h + 1.0),
    ("sub", lambda h: h - h.detach() * 0.5, lambda h: h - jax.lax.stop_gradient(h) * 0.5),
    ("neg", lambda h: -h, lambda h: -h),
    ("sum dim", lambda h: h.sum(dim=0, keepdim=True), lambda h: h.sum(axis=0, keepdims=True)),
    ("mean", lambda h: h.mean(), lambda h: h.mean()),
    ("cumsum", lambda h: h.cumsum(1), lambda h: jnp.cumsum(h, 1)),
    ("cat", lambda h: lf.cat([h, h * 1.0]), lambda h: jnp.concatenate([h, h])),
    ("getitem slice", lambda h: h[1:], lambda h: h[1:]),
    ("reshape", lambda h: h.reshape(8), lambda h: h.reshape(8)),
    ("transpose", lambda h: h.t(), lambda h: h.T),
    ("flip", lambda h: h.flip(0), lambda h: h[::-1]),
    ("index_select", lambda h: h.index_select(1, lf.tensor([3, 0])), lambda h: h[:, jnp.array([3, 0])]),
    ("float cast", lambda h: h.float().double(), lambda h: h.astype(jnp.float32).astype(jnp.float64)),
]

X2 = np.array([[0.3, -1.2, 0.8, 2.0], [1.5, 0.4, -0.7, 0.9]])
Y2 = np.array([[0.5, 2.0, -1.0, 0.25], [1.25, -0.5, 3.0, 0.75]])


@pytest.mark.parametrize("name,lf_read,jnp_read", READ_THEN_UPDATE, ids=[c[0] for c in READ_THEN_UPDATE])
def test_read_through_a_linear_op_then_update_in_place(name, lf_read, jnp_read):
    x = lf.tensor(X2, requires_grad=True)
    y = lf.tensor(Y2, requires_grad=True)
    h = x * 2.0
    g = lf_read(h)
    h.mul_(y)
    loss = (g * g).sum() + (h * x).sum()

    def ref(x, y):
        g = jnp_read(x * 2.0)
        return (g * g).sum() + (x * 2.0 * y * x).sum()

    loss.backward()
    gx, gy = jax.grad(ref, argnums=(0, 1))(jnp.asarray(X2), jnp.asarray(Y2))
    np.testing.assert_allclose(loss.item(), float(ref(jnp.asarray(X2), jnp.asarray(Y2))), rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), np.asarray(gx), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(y.grad.numpy(), np.asarray(gy), rtol=1e-6, atol=1e-9)


def test_inplace_on_non_leaf_sets_grad_fn_to_the_inplace_op():
    x = lf.tensor(X0, requires_grad=True)
    h = x.exp()
    assert h.grad_fn.name() == "ExpBackward0"
    h.mul_(2.0)
    assert h.grad_fn.name() == "MulBackward0"
    assert not h.is_leaf and h.requires_grad


def test_setitem_of_grad_value_into_plain_tensor_joins_the_graph():
    x = lf.tensor(X0, requires_grad=True)
    h = lf.zeros(4, dtype=lf.float64)
    h[1] = x[0] * 2.0
    h[3] = x[2]
    assert h.requires_grad and not h.is_leaf
    (h * h).sum().backward()

    def ref(x):
        return (jnp.zeros(4).at[1].set(x[0] * 2.0).at[3].set(x[2]) ** 2).sum()

    np.testing.assert_allclose(x.grad.numpy(), np.asarray(jax.grad(ref)(jnp.asarray(X0))), rtol=1e-12)


def test_inplace_under_no_grad_on_non_leaf_is_not_recorded():
    x = lf.tensor(X0, requires_grad=True)
    h = x * 3.0
    with lf.no_grad():
        h.add_(100.0)  # a constant shift: no effect on the gradient
    (h * 2.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(4, 6.0))
    np.testing.assert_allclose(h.detach().numpy(), X0 * 3.0 + 100.0)


# --------------------------------------------------------------------------- pickle after in-place updates


def test_pickle_after_donated_update_and_of_an_alias():
    t = lf.zeros(5)
    d = t.detach()
    t.add_(2.0)
    t[1] = 9.0
    t2 = pickle.loads(pickle.dumps(t))
    d2 = pickle.loads(pickle.dumps(d))
    np.testing.assert_array_equal(t2.numpy(), [2.0, 9.0, 2.0, 2.0, 2.0])
    np.testing.assert_array_equal(d2.numpy(), [2.0, 9.0, 2.0, 2.0, 2.0])  # d shares t's storage (torch)
    assert t2.dtype is lf.float32 and t2._version == 0
    t2.add_(1.0)  # the unpickled tensor owns its buffer: updating it leaves the original alone
    np.testing.assert_array_equal(t.numpy(), [2.0, 9.0, 2.0, 2.0, 2.0])


def test_pickle_of_leaf_requiring_grad_after_no_grad_update():
    w = lf.tensor([1.0, 2.0], requires_grad=True)
    with lf.no_grad():
        w.mul_(3.0)
    w2 = pickle.loads(pickle.dumps(w))
    assert w2.requires_grad and w2.is_leaf and w2.grad is None
    np.testing.assert_array_equal(w2.detach().numpy(), [3.0, 6.0])
    with pytest.raises(lf.AutogradError):
        w2.add_(1.0)
