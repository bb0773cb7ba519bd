"""``lazyflow.nn.functional``: the stateless forms of the layers (``torch.nn.functional``).

Each private module lists its public names in ``__all__``; this package re-exports all of them.
"""

from . import _attention, _conv, _norm
from ._attention import *
from ._conv import *
from ._norm import *

__all__ = [n for m in (_attention, _conv, _norm) for n in m.__all__]
