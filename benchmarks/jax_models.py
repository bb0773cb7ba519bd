"""Hand-written ``jax.jit`` training steps of the benchmark models (benchmarks/models.py), the reference a
compiled lazyflow step is measured against (issue 14: "each benchmark keeps ... a hand-written jax.jit of the same
model").

Written the way a JAX user would write them: plain ``jax.numpy``/``lax`` functions of a dict of arrays named as the
torch model's ``state_dict()``, NCHW convolutions through ``lax.conv_general_dilated``, BatchNorm in training mode
(batch statistics, running statistics updated as torch does), the optimizer's update by hand (torch's SGD with
momentum, torch's AdamW), the whole step in one ``jax.jit`` with parameters and optimizer state donated. No lazyflow
code is involved. ``tests/test_bench_references.py`` checks each against torch (same weights: same loss, same
updated parameters), so a reference that drifts from the model it stands for fails there.
"""

from __future__ import annotations

import math
import time

BN_EPS = 1e-5
BN_MOMENTUM = 0.1
LN_EPS = 1e-5


def _ops():
    import jax
    import jax.numpy as jnp
    from jax import lax

    return jax, jnp, lax


def _conv(x, w, stride=1, pad=0):
    _, _, lax = _ops()
    return lax.conv_general_dilated(
        x, w, (stride, stride), ((pad, pad), (pad, pad)), dimension_numbers=("NCHW", "OIHW", "NCHW")
    )


def _bn(p, name, x, new_buffers):
    """Training-mode BatchNorm2d over NCHW ``x``; the updated running statistics go into ``new_buffers``."""
    _, jnp, lax = _ops()
    mean = x.mean((0, 2, 3))
    var = x.var((0, 2, 3))
    n = x.size // x.shape[1]
    new_buffers[f"{name}.running_mean"] = (1 - BN_MOMENTUM) * p[f"{name}.running_mean"] + BN_MOMENTUM * mean
    new_buffers[f"{name}.running_var"] = (1 - BN_MOMENTUM) * p[f"{name}.running_var"] + BN_MOMENTUM * var * n / (n - 1)
    scale = p[f"{name}.weight"] * lax.rsqrt(var + BN_EPS)
    return x * scale[None, :, None, None] + (p[f"{name}.bias"] - mean * scale)[None, :, None, None]


def _linear(p, name, x):
    y = x @ p[f"{name}.weight"].T
    b = p.get(f"{name}.bias")
    return y if b is None else y + b


def _max_pool(x, k, s, pad):
    _, jnp, lax = _ops()
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, k, k), (1, 1, s, s), ((0, 0), (0, 0), (pad, pad), (pad, pad)))


def _relu(x):
    _, jnp, _ = _ops()
    return jnp.maximum(x, 0)


def mlp_forward(p, x, nb):
    return _linear(p, "2", _relu(_linear(p, "0", x)))


def small_cnn_forward(p, x, nb):
    h = _relu(_bn(p, "1", _conv(x, p["0.weight"], pad=1) + p["0.bias"][None, :, None, None], nb))
    h = _relu(_bn(p, "4", _conv(h, p["3.weight"], pad=1) + p["3.bias"][None, :, None, None], nb))
    h = _max_pool(h, 2, 2, 0)
    return _linear(p, "8", h.reshape(h.shape[0], -1))


def _resnet_forward(p, x, nb, layers, bottleneck):
    h = _max_pool(_relu(_bn(p, "bn1", _conv(x, p["conv1.weight"], 2, 3), nb)), 3, 2, 1)
    for li, n in enumerate(layers, 1):
        for bi in range(n):
            pre = f"layer{li}.{bi}"
            stride = 2 if (bi == 0 and li > 1) else 1
            idt = h
            if f"{pre}.downsample.0.weight" in p:
                idt = _bn(p, f"{pre}.downsample.1", _conv(h, p[f"{pre}.downsample.0.weight"], stride), nb)
            if bottleneck:
                out = _relu(_bn(p, f"{pre}.bn1", _conv(h, p[f"{pre}.conv1.weight"]), nb))
                out = _relu(_bn(p, f"{pre}.bn2", _conv(out, p[f"{pre}.conv2.weight"], stride, 1), nb))
                out = _bn(p, f"{pre}.bn3", _conv(out, p[f"{pre}.conv3.weight"]), nb)
            else:
                out = _relu(_bn(p, f"{pre}.bn1", _conv(h, p[f"{pre}.conv1.weight"], stride, 1), nb))
                out = _bn(p, f"{pre}.bn2", _conv(out, p[f"{pre}.conv2.weight"], 1, 1), nb)
            h = _relu(out + idt)
    return _linear(p, "fc", h.mean((2, 3)))


def resnet18_forward(p, x, nb):
    return _resnet_forward(p, x, nb, (2, 2, 2, 2), False)


def resnet50_forward(p, x, nb):
    return _resnet_forward(p, x, nb, (3, 4, 6, 3), True)


def _layer_norm(p, name, x):
    _, _, lax = _ops()
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + LN_EPS) * p[f"{name}.weight"] + p[f"{name}.bias"]


def transformer_forward(p, tokens, nb, nhead=4):
    """benchmarks.models.transformer: Embedding, pre-LayerNorm encoder layers (ReLU feed-forward, no dropout),
    a Linear head."""
    jax, jnp, _ = _ops()
    h = p["emb.weight"][tokens]
    b, t, d = h.shape
    hd = d // nhead
    i = 0
    while f"enc.layers.{i}.norm1.weight" in p:
        pre = f"enc.layers.{i}"
        y = _layer_norm(p, f"{pre}.norm1", h)
        qkv = y @ p[f"{pre}.self_attn.in_proj_weight"].T + p[f"{pre}.self_attn.in_proj_bias"]
        q, k, v = (z.reshape(b, t, nhead, hd).transpose(0, 2, 1, 3) for z in jnp.split(qkv, 3, axis=-1))
        att = jax.nn.softmax((q @ k.transpose(0, 1, 3, 2)) / math.sqrt(hd), axis=-1)
        y = (att @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
        h = h + _linear(p, f"{pre}.self_attn.out_proj", y)
        y = _layer_norm(p, f"{pre}.norm2", h)
        h = h + _linear(p, f"{pre}.linear2", _relu(_linear(p, f"{pre}.linear1", y)))
        i += 1
    return _linear(p, "head", h)


FORWARDS = {
    "mlp": mlp_forward,
    "small_cnn": small_cnn_forward,
    "resnet18": resnet18_forward,
    "resnet50": resnet50_forward,
    "transformer": transformer_forward,
}


def _cross_entropy(logits, y):
    jax, jnp, _ = _ops()
    logits = logits.reshape(-1, logits.shape[-1])
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, y.reshape(-1)[:, None], 1))


def _sgd(params, grads, state, step, lr=0.01, momentum=0.9):
    """torch.optim.SGD(lr, momentum): buf = momentum * buf + g (the first step's buf is g), p -= lr * buf."""
    jax, _, _ = _ops()
    bufs = jax.tree_util.tree_map(lambda b, g: momentum * b + g, state, grads)
    return jax.tree_util.tree_map(lambda p, b: p - lr * b, params, bufs), bufs


def _adamw(params, grads, state, step, lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
    """torch.optim.AdamW(lr) at its defaults; ``step`` is the step number (1 on the first step)."""
    jax, jnp, _ = _ops()
    b1, b2 = betas
    step = jnp.asarray(step, jnp.float32)  # the corrections stay float32 (a Python int step would be int64)
    m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, state["m"], grads)
    v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, state["v"], grads)
    bc1 = 1 - b1**step
    bc2 = 1 - b2**step

    def upd(p, m, v):
        p = p * (1 - lr * weight_decay)
        return p - (lr / bc1) * m / (jnp.sqrt(v) / jnp.sqrt(bc2) + eps)

    return jax.tree_util.tree_map(upd, params, m, v), {"m": m, "v": v}


OPTIMIZERS = {"sgd": _sgd, "adamw": _adamw}


def make_step(name: str, opt_name: str):
    """The jitted step ``(params, buffers, opt_state, step, x, y) -> (params, buffers, opt_state, loss)`` of model
    ``name`` (parameters, BatchNorm buffers and optimizer state donated) and the optimizer state's initializer."""
    jax, jnp, _ = _ops()
    forward = FORWARDS[name]
    update = OPTIMIZERS[opt_name]

    def loss_fn(params, buffers, x, y):
        nb: dict = {}
        loss = _cross_entropy(forward({**params, **buffers}, x, nb), y)
        return loss, nb

    def step(params, buffers, opt_state, step_no, x, y):
        (loss, nb), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, buffers, x, y)
        params, opt_state = update(params, grads, opt_state, step_no)
        return params, {**buffers, **nb}, opt_state, loss

    def init(params):
        zeros = {k: jnp.zeros_like(v) for k, v in params.items()}
        if opt_name == "adamw":
            return {"m": zeros, "v": {k: jnp.zeros_like(v) for k, v in params.items()}}
        return zeros

    return jax.jit(step, donate_argnums=(0, 1, 2)), init


def split_state(torch_model):
    """A torch model's parameters and floating-point buffers as two dicts of jax arrays (state_dict names; integer
    buffers such as ``num_batches_tracked`` are left out: no step reads them)."""
    import jax.numpy as jnp

    params = {k: jnp.asarray(v.detach().numpy()) for k, v in torch_model.named_parameters()}
    buffers = {k: jnp.asarray(v.detach().numpy()) for k, v in torch_model.named_buffers() if v.dtype.is_floating_point}
    return params, buffers


def jit_step(name: str, opt_name: str, torch_model, xs, ys):
    """A runner of the hand-written step on the torch model's current weights (``run()`` does one step and waits
    for it) and the seconds its ahead-of-time compile took."""
    import jax
    import jax.numpy as jnp

    fn, init = make_step(name, opt_name)
    params, buffers = split_state(torch_model)
    x, y = jnp.asarray(xs), jnp.asarray(ys)
    st = {"p": params, "b": buffers, "o": init(params), "n": 0}
    t0 = time.perf_counter()
    fn.lower(st["p"], st["b"], st["o"], 1, x, y).compile()
    compile_s = time.perf_counter() - t0

    def run():
        st["n"] += 1
        st["p"], st["b"], st["o"], loss = fn(st["p"], st["b"], st["o"], st["n"], x, y)
        jax.block_until_ready(loss)

    return run, compile_s
