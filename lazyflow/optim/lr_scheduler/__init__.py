"""Learning-rate schedulers (``torch.optim.lr_scheduler``), with torch's recurrences and state dicts.

A scheduler writes Python floats into ``optimizer.param_groups[i]["lr"]``; optimizers pass learning rates
to their compiled update as arguments, so a schedule never triggers a recompilation. The formulas are
torch's, operation for operation (most schedules are recursive: each step scales the current lr), so the
learning rates match torch's to the last bit in double precision. ``state_dict()`` holds every attribute
but the optimizer, under torch's attribute names.
"""

from __future__ import annotations

from ._adaptive import CosineAnnealingWarmRestarts, OneCycleLR, ReduceLROnPlateau
from ._base import LRScheduler
from ._composite import ChainedScheduler, SequentialLR
from ._cyclic import CyclicLR
from ._schedules import (
    ConstantLR,
    CosineAnnealingLR,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    MultiplicativeLR,
    MultiStepLR,
    PolynomialLR,
    StepLR,
)

__all__ = [
    "LRScheduler",
    "CyclicLR",
    "LambdaLR",
    "MultiplicativeLR",
    "StepLR",
    "MultiStepLR",
    "ConstantLR",
    "LinearLR",
    "ExponentialLR",
    "SequentialLR",
    "PolynomialLR",
    "CosineAnnealingLR",
    "ChainedScheduler",
    "ReduceLROnPlateau",
    "CosineAnnealingWarmRestarts",
    "OneCycleLR",
]
