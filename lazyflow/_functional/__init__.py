"""Every tensor op as a function with torch's signature; the same functions become Tensor methods.

Each function validates and normalises its arguments (dims, shapes, dtypes) in Python, then makes exactly one call
into the active interpreter with a primitive from the op table. Composite ops (``std_mean``, ``chunk`` ...) are
written once on top of primitives and need no backward rule. The families mirror ``lazyflow/ops``, in import
order: ``elementwise`` < ``shape`` < ``linalg`` < ``reduction`` < ``indexing`` < ``inplace`` < ``compare`` <
``combine`` < ``search``.
"""

from __future__ import annotations

from . import (
    arrange,
    combine,
    compare,
    complex_parts,
    elementwise,
    indexing,
    inplace,
    linalg,
    ranges,
    reduce_index,
    reduction,
    search,
    shape,
    special,
    stats,
)
from .arrange import *
from .combine import *
from .compare import *
from .complex_parts import *
from .elementwise import *
from .indexing import *
from .inplace import *
from .linalg import *
from .ranges import *
from .reduce_index import *
from .reduction import *
from .search import *
from .shape import *
from .special import *
from .stats import *

__all__ = sorted(
    {
        *combine.__all__,
        *compare.__all__,
        *complex_parts.__all__,
        *search.__all__,
        *elementwise.__all__,
        *shape.__all__,
        *linalg.__all__,
        *reduction.__all__,
        *indexing.__all__,
        *inplace.__all__,
        *special.__all__,
        *stats.__all__,
        *reduce_index.__all__,
        *arrange.__all__,
        *ranges.__all__,
    }
)

# lf.<name> functions that torch.Tensor has no method for (Tensor.where(cond, y) has its own argument order)
_NOT_METHODS = frozenset(
    {
        "broadcast_shapes",
        "broadcast_tensors",
        "block_diag",
        "bucketize",
        "cartesian_prod",
        "cdist",
        "combinations",
        "can_cast",
        "cat",
        "concat",
        "concatenate",
        "einsum",
        "hstack",
        "meshgrid",
        "searchsorted",
        "tril_indices",
        "triu_indices",
        "is_tensor",
        "one_hot",
        "pad",
        "result_type",
        "stack",
        "vstack",
        "where",
        *special.NOT_METHODS,
        *stats.NOT_METHODS,
        *arrange.NOT_METHODS,
        *ranges.NOT_METHODS,
        *complex_parts.NOT_METHODS,
    }
)
# Tensor methods without an lf.<name> function: every in-place function, four activations and unfold
_METHOD_ONLY = {
    **{
        n: f
        for n, f in vars(inplace).items()
        if not n.startswith("_") and n.endswith("_") and getattr(f, "__module__", "") == inplace.__name__
    },
    **{n: getattr(elementwise, n) for n in ("elu", "hardtanh", "leaky_relu", "logsigmoid")},
    "unfold": indexing.tensor_unfold,  # torch has no top-level unfold
    **special.METHOD_ONLY,
    **arrange.METHOD_ONLY,
    **ranges.METHOD_ONLY,
    **stats.METHOD_ONLY,
    **complex_parts.METHOD_ONLY,
    **reduce_index.METHOD_ONLY,
}

# lf.<name> functions whose Tensor method _tensor.py defines itself (hot paths: no argument check)
_OWN_METHODS = frozenset({"is_floating_point", "numel"})

METHODS = {**{n: globals()[n] for n in __all__ if n not in _NOT_METHODS | _OWN_METHODS}, **_METHOD_ONLY}
"""name -> function attached to Tensor as a method (derived: nothing lists the names twice)."""
