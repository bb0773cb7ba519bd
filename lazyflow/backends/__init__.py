"""``lf.backends``: torch.backends' switches, with torch's defaults.

Where JAX has the same knob the switch is wired to it (``cuda.matmul.allow_tf32`` is
``lf.set_float32_matmul_precision``, i.e. JAX's ``jax_default_matmul_precision``); elsewhere (``cudnn.benchmark``,
``cudnn.deterministic``...) it is a flag that keeps its value and changes nothing, because XLA chooses kernels and
autotunes by itself. Each is settable, so a script's prologue runs unchanged.
"""

from . import cpu, cuda, cudnn, mps

__all__ = ["cpu", "cuda", "cudnn", "mps"]
