"""Tape autograd: ``backward``, ``grad``, the gradient-mode switches, custom ``Function``s, ``gradcheck``, anomaly
detection and ``lf.autograd.functional``."""

from ._gradcheck import GradcheckError, gradcheck, gradgradcheck
from .anomaly_mode import detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled, set_detect_anomaly
from .function import Function, FunctionCtx, backward, grad, once_differentiable
from .grad_mode import (
    enable_grad,
    enforce_grad_layout_policy,
    inference_mode,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)

__all__ = [
    "backward",
    "grad",
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "is_grad_enabled",
    "inference_mode",
    "enforce_grad_layout_policy",
    "Function",
    "FunctionCtx",
    "once_differentiable",
    "gradcheck",
    "gradgradcheck",
    "GradcheckError",
    "detect_anomaly",
    "set_detect_anomaly",
    "is_anomaly_enabled",
    "is_anomaly_check_nan_enabled",
]
