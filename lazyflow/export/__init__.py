"""``lf.export``: torch.export's entry points over ``jax.export``.

``export(model, (x,), dynamic_shapes=...)`` traces the module (in eval mode) with graph mode's interpreter into a
pure JAX function of ``(params, *inputs)``, lowers it to StableHLO for CPU and CUDA and keeps the weights beside
it. ``save``/``load`` write and read it as a lazyflow checkpoint; the loaded program runs without the model's
Python class.
"""

from ._file import load, save
from ._program import Dim, ExportedProgram, export
from ._pure import ExportError

__all__ = ["export", "save", "load", "Dim", "ExportedProgram", "ExportError"]
