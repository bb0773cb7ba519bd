"""lazyflow: a PyTorch-style deep-learning framework on JAX.

Two modes over one set of objects -- eager (every op runs at once through a cached op-signature
interpreter) and lazy/graph (``lf.compile``, ``lf.nn.Graph``) -- and one checkpoint layout for both.
Importing lazyflow switches on JAX's ``jax_enable_x64`` and switches off CPU async dispatch (see README).
"""

from . import (
    _methods,  # noqa: F401,E402
    autograd,  # noqa: E402
    eager,  # noqa: E402  (installs the eager interpreter)
)
from ._core import config as _config  # noqa: F401  (process configuration first)
from ._core.device import Device, device
from ._core.dtypes import (
    DType,
    bfloat16,
    bool_,
    double,
    float,
    float16,
    float32,
    float64,
    get_default_dtype,
    half,
    int,
    int8,
    int16,
    int32,
    int64,
    long,
    promote_types,
    set_default_dtype,
    short,
    uint8,
)
from ._core.errors import (
    AutogradError,
    CheckpointError,
    DeviceError,
    DTypeError,
    GraphError,
    IndexOutOfRangeError,
    LazyflowError,
    OpError,
    ShapeError,
)
from ._creation import (  # noqa: E402
    Generator,
    arange,
    as_tensor,
    bernoulli,
    default_generator,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    get_rng_state,
    initial_seed,
    linspace,
    manual_seed,
    multinomial,
    normal,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    randperm,
    seed,
    set_rng_state,
    tensor,
    zeros,
    zeros_like,
)
from ._functional import *  # noqa: E402,F401,F403  (every op; the list is _functional.__all__)
from ._tensor import Tensor, from_jax
from .autograd import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled  # noqa: E402

bool = bool_  # noqa: A001  torch's name; the builtin stays reachable as builtins.bool

__version__ = "0.1.0"

__all__ = [n for n in dir() if not n.startswith("_")]
