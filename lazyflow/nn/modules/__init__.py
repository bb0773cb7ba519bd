"""The layer classes; each file lists its public names in ``__all__``."""

from . import (
    activation,
    activation_more,
    adaptive,
    container,
    conv,
    dropout,
    flatten,
    fold,
    fractional,
    lazy,
    linear,
    linear_ce,
    loss,
    loss_more,
    normalization,
    normalization_more,
    padding,
    pooling,
    pooling_more,
    rnn,
    sparse,
    transformer,
    transformer_decoder,
    unpool,
    upsampling,
    utils,
)
from .activation import *
from .activation_more import *
from .adaptive import *
from .container import *
from .conv import *
from .dropout import *
from .flatten import *
from .fold import *
from .fractional import *
from .lazy import *
from .linear import *
from .linear_ce import *
from .loss import *
from .loss_more import *
from .normalization import *
from .normalization_more import *
from .padding import *
from .pooling import *
from .pooling_more import *
from .rnn import *
from .sparse import *
from .transformer import *
from .transformer_decoder import *
from .unpool import *
from .upsampling import *

__all__ = [
    n
    for m in (
        container,
        linear,
        activation,
        loss,
        dropout,
        sparse,
        flatten,
        conv,
        pooling,
        normalization,
        transformer,
        transformer_decoder,
        rnn,
        upsampling,
        fold,
        padding,
        pooling_more,
        activation_more,
        normalization_more,
        loss_more,
        unpool,
        lazy,
        adaptive,
        linear_ce,
        fractional,
    )
    for n in m.__all__
]
