"""``lazyflow.nn.functional``: the stateless forms of the layers (``torch.nn.functional``).

Each private module lists its public names in ``__all__``; this package re-exports all of them.
"""

from . import (
    _activation,
    _activation_more,
    _attention,
    _conv,
    _ctc,
    _embedding_bag,
    _fold,
    _fractional,
    _grid,
    _grouped,
    _interpolate,
    _linear,
    _linear_ce,
    _loss,
    _loss_more,
    _norm,
    _norm_more,
    _pool,
    _unpool,
)
from ._activation import *
from ._activation_more import *
from ._attention import *
from ._conv import *
from ._ctc import *
from ._embedding_bag import *
from ._fold import *
from ._fractional import *
from ._grid import *
from ._grouped import *
from ._interpolate import *
from ._linear import *
from ._linear_ce import *
from ._loss import *
from ._loss_more import *
from ._norm import *
from ._norm_more import *
from ._pool import *
from ._unpool import *

__all__ = [
    n
    for m in (
        _activation,
        _linear,
        _loss,
        _conv,
        _norm,
        _attention,
        _interpolate,
        _fold,
        _pool,
        _activation_more,
        _norm_more,
        _loss_more,
        _ctc,
        _unpool,
        _grid,
        _embedding_bag,
        _linear_ce,
        _fractional,
        _grouped,
    )
    for n in m.__all__
]
