"""Tape autograd: ``backward``, ``grad`` and the gradient-mode switches."""

from .function import backward, grad
from .grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled

__all__ = ["backward", "grad", "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode"]
