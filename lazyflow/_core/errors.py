"""lazyflow's error classes: each subclasses the matching built-in exception."""

from __future__ import annotations

import pickle

__all__ = [
    "LazyflowError",
    "ShapeError",
    "DTypeError",
    "DeviceError",
    "IndexOutOfRangeError",
    "AutogradError",
    "OpError",
    "ArgumentError",
    "ValueRangeError",
    "DivisionByZeroError",
    "OutOfMemoryError",
    "CheckpointError",
    "CheckpointUnpicklingError",
    "CheckpointWriteError",
    "GraphError",
    "NoCudaError",
    "NotSupportedError",
    "DistributedError",
    "DistributedNotInitializedError",
    "user_frame",
]


class LazyflowError(Exception):
    """Base class of every error lazyflow raises on purpose."""


class ShapeError(LazyflowError, ValueError, RuntimeError):
    """Shapes that do not fit the operation (broadcasting, matmul, reshape...).

    Both a ValueError and a RuntimeError: torch reports shape mismatches as RuntimeError, so code written for torch
    catches this as it did."""


class DTypeError(LazyflowError, TypeError, RuntimeError):
    """A dtype the operation does not accept, or one this configuration cannot represent.

    Both a TypeError and a RuntimeError: torch reports most dtype problems as RuntimeError (kernels not implemented
    for a dtype, matrix products of different dtypes, integers to negative powers) and argument-type problems as
    TypeError, so code written for torch catches this with either."""


class DeviceError(LazyflowError, RuntimeError):
    """A device that does not exist here, or tensors on different devices."""


class IndexOutOfRangeError(LazyflowError, IndexError):
    """An index or dimension outside the tensor's range."""


class AutogradError(LazyflowError, RuntimeError):
    """Misuse of autograd: backward through a freed graph, in-place on a leaf, non-scalar backward..."""


class ValueRangeError(LazyflowError, ValueError, RuntimeError):
    """A value the requested dtype cannot hold: a Python int beyond int64 (torch's ValueError "Overflow when
    unpacking"), or 300 as uint8 (torch's RuntimeError "cannot be converted ... without overflow")."""


class DivisionByZeroError(LazyflowError, ZeroDivisionError, RuntimeError):
    """Integer division or remainder by zero (``//``, ``%``, ``fmod``, ``div(rounding_mode=...)``), which torch's CPU
    kernels refuse (a RuntimeError reading "ZeroDivisionError"); floating division by zero gives inf/nan as in torch."""


class OutOfMemoryError(LazyflowError, MemoryError, RuntimeError):
    """The device could not allocate a result (``lf.zeros(10**13)``). A MemoryError, and a RuntimeError like
    ``torch.OutOfMemoryError``; the message names the operation and the bytes asked for."""


class ArgumentError(LazyflowError, TypeError):
    """An argument of the wrong type (a size that is not an integer, a module size given as a string...)."""


class OpError(LazyflowError, RuntimeError):
    """An operation failed for a reason not covered by a more specific class."""


class CheckpointError(LazyflowError, RuntimeError):
    """A checkpoint that is missing, partial, corrupted, foreign or unsafe to load."""


class CheckpointUnpicklingError(CheckpointError, pickle.UnpicklingError):
    """A checkpoint's metadata that the ``weights_only`` unpickler refused (a global, call or opcode outside
    its allowlist) or that is not a well-formed pickle. Nothing in it was run."""


class CheckpointWriteError(CheckpointError, OSError):
    """A save that failed on the filesystem (read-only, full, permission denied...). ``errno`` is the
    operating system's; the previous checkpoint at the path is unchanged."""


class GraphError(LazyflowError, RuntimeError):
    """An operation that graph mode cannot trace (data-dependent Python control flow, ``.item()`` on a
    traced tensor, a non-tensor result...). The message names the operation and the user's file:line."""


class NoCudaError(DeviceError, AssertionError):
    """A CUDA-only call (``lf.cuda.current_device()``, ``synchronize()``, ``get_device_name()``...) where JAX has no
    GPU. An AssertionError, as torch's CPU build raises ("Torch not compiled with CUDA enabled"), and a
    RuntimeError, as torch raises on entering ``torch.cuda.device(0)`` there."""


class NotSupportedError(LazyflowError, NotImplementedError):
    """A torch feature lazyflow deliberately does not emulate (``lf.jit.save``: TorchScript archives); the message
    names what to use instead."""


class DistributedError(LazyflowError, RuntimeError):
    """A collective that cannot run as called: ranks disagree on its shape/dtype/op, a rank outside the group
    called it, or its arguments do not fit the group (torch raises RuntimeError/DistBackendError)."""


class DistributedNotInitializedError(DistributedError, ValueError):
    """A collective before ``init_process_group`` (torch: ValueError "Default process group has not been
    initialized")."""


def user_frame() -> str:
    """``file:line`` of the innermost stack frame outside lazyflow (where the user's code is)."""
    import os
    import sys

    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    f = sys._getframe(1)
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if not fn.startswith(pkg + os.sep) and "/jax/" not in fn and "/jax/_src/" not in fn:
            return f"{f.f_code.co_filename}:{f.f_lineno}"
        f = f.f_back
    return "<unknown>"
