"""The op table (``REGISTRY``): importing this package registers every primitive."""

from . import (
    complex,
    creation,
    fft,
    grouped,
    householder,
    indexing,
    linalg,
    linalg_extra,
    math,
    nn,
    nn_basic,
    random,
    rnn,
    rnn_packed,
    search,
    shape,
    special,
)
from .table import REGISTRY, OpDef, backward_fn, diff_positions, op, specialize

__all__ = ["REGISTRY", "OpDef", "op", "specialize", "backward_fn", "diff_positions"]
