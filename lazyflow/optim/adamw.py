"""AdamW (``torch.optim.AdamW``): Adam with decoupled weight decay."""

from __future__ import annotations

from .._tensor import Tensor
from .adam import Adam

__all__ = ["AdamW"]


class AdamW(Adam):
    """Adam with decoupled weight decay (the weights shrink by ``lr * weight_decay`` each step).

    Args:
        params: parameters or param groups to optimize.
        lr: learning rate (default 1e-3).
        betas: running-average coefficients (default (0.9, 0.999)).
        eps: term added to the denominator (default 1e-8).
        weight_decay: decoupled weight decay (default 1e-2).
        amsgrad: use the AMSGrad variant.
        maximize: maximize the objective instead of minimizing.
        foreach, fused, capturable: accepted for torch compatibility. differentiable: must be False.
    Raises:
        ValueError: a negative lr, eps or weight_decay, or betas outside [0, 1).
    >>> opt = lf.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    """

    def __init__(
        self,
        params,
        lr: float | Tensor = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        super().__init__(
            params,
            lr,
            betas,
            eps,
            weight_decay,
            amsgrad,
            foreach=foreach,
            maximize=maximize,
            capturable=capturable,
            differentiable=differentiable,
            fused=fused,
            decoupled_weight_decay=True,
        )

    def _fix_loaded_group(self, group: dict) -> None:
        group["decoupled_weight_decay"] = True
