"""lazyflow: a PyTorch-style deep-learning framework on JAX.

Two modes over one set of objects -- eager (every op runs at once through a cached op-signature
interpreter) and lazy/graph (``lf.compile``, ``lf.nn.Graph``) -- and one checkpoint layout for both.
Importing lazyflow switches on JAX's ``jax_enable_x64`` and switches off CPU async dispatch (see README).
"""
# Import order matters here (process configuration first, then the eager interpreter); isort is off for this file.

import math as _math

from ._core import config as _config
from ._core.device import Device, device
from ._core.size import Size
from ._core.formats import (
    channels_last,
    channels_last_3d,
    contiguous_format,
    layout,
    legacy_contiguous_format,
    memory_format,
    preserve_format,
    strided,
)
from ._core.dtypes import (
    DType,
    bfloat16,
    bool_,
    cdouble,
    cfloat,
    complex64,
    complex128,
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
    ArgumentError,
    AutogradError,
    CheckpointError,
    CheckpointUnpicklingError,
    CheckpointWriteError,
    DeviceError,
    DTypeError,
    GraphError,
    IndexOutOfRangeError,
    LazyflowError,
    OpError,
    ShapeError,
    ValueRangeError,
    DivisionByZeroError,
    OutOfMemoryError,
    NoCudaError,
    NotSupportedError,
)
from ._core.finfo import finfo, iinfo
from ._core.precision import get_float32_matmul_precision, set_float32_matmul_precision
from ._tensor import Tensor, from_jax
from . import eager  # installs the eager interpreter
from . import _methods
from ._creation import (
    Generator,
    arange,
    as_tensor,
    bernoulli,
    default_generator,
    empty,
    empty_like,
    eye,
    from_numpy,
    from_dlpack,
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
from ._functional import *
from . import linalg, fft
from ._linalg_top import *
from ._runtime import *
from ._spectral import istft, stft
from ._tensor_extras import frombuffer, thread_safe_generator
from ._householder import geqrf, orgqr, ormqr
from ._methods import set_printoptions
from ._legacy import (
    BFloat16Tensor,
    BoolTensor,
    ByteTensor,
    CharTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
    ShortTensor,
)
from . import autograd
from .autograd import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from . import graph
from .graph import compile
from . import nn, optim, utils, distributed
from .nn.functional import (  # torch.* names that are nn.functional's functions
    adaptive_avg_pool1d,
    avg_pool1d,
    bilinear,
    celu_,
    channel_shuffle,
    conv1d,
    conv2d,
    conv3d,
    conv_tbc,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
    cosine_similarity,
    hardshrink,
    pairwise_distance,
    pdist,
    pixel_shuffle,
    pixel_unshuffle,
    prelu,
    relu_,
    rrelu_,
    selu_,
    threshold_,
)
from .amp import autocast
from .graph.nn_graph import Graph as _Graph

nn.Graph = _Graph  # lf.nn.Graph (defined in lazyflow.graph: it sits above nn and optim)
from . import checkpoint, config
from . import func
from .autograd import functional as _autograd_functional  # lf.autograd.functional (sits above the Tensor ops)
from .func import vmap
from . import accelerator, backends, cuda, jit, export, multiprocessing, random, testing
from . import distributions
from .checkpoint import load, save
from . import hub

bool = bool_

from ._core.version import __version__

# torch's numeric constants (torch.pi, torch.inf...) and numpy's newaxis alias
pi, e, inf, nan, newaxis = _math.pi, _math.e, _math.inf, _math.nan, None

__all__ = [n for n in dir() if not n.startswith("_")]


def __getattr__(name: str):
    # lf.onnx needs the optional onnx extra: imported on first use, so `import lazyflow` never requires onnx
    if name == "onnx":
        import importlib

        return importlib.import_module("lazyflow.onnx")
    raise AttributeError(f"module 'lazyflow' has no attribute {name!r}")
