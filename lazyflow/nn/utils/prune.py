"""``nn.utils.prune`` basics: unstructured pruning by a mask, with torch's names and state_dict keys.

Pruning ``name`` moves the parameter to ``<name>_orig`` (the same Parameter object), adds a ``<name>_mask``
buffer, and makes ``<name>`` read ``<name>_orig * <name>_mask`` (torch recomputes it in a forward pre-hook; the
values are the same, and a compiled forward leaves nothing traced behind). Pruning again combines masks: the new
amount counts among the entries still unpruned.
:func:`remove` makes it permanent (``<name>`` becomes a parameter holding the masked values).
"""

from __future__ import annotations

import numbers
from typing import TypeVar

from ..._creation import ones_like, rand_like
from ..._tensor import Tensor
from ...autograd import no_grad
from ..module import Module
from . import _derived

__all__ = [
    "BasePruningMethod",
    "Identity",
    "RandomUnstructured",
    "L1Unstructured",
    "identity",
    "random_unstructured",
    "l1_unstructured",
    "remove",
    "is_pruned",
]

_M = TypeVar("_M", bound=Module)


def _n_to_prune(amount: int | float, n: int) -> int:
    if isinstance(amount, bool) or not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {type(amount).__name__}. Must be int or float.")
    if isinstance(amount, numbers.Integral):
        if amount < 0:
            raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")
        if amount > n:
            raise ValueError(f"amount={amount} should be smaller than the number of parameters to prune={n}")
        return int(amount)
    if not 0.0 <= amount <= 1.0:
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")
    return round(amount * n)


class BasePruningMethod:
    """A pruning method: ``compute_mask(t, default_mask)`` gives the new 0/1 mask; the instance is the hook."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, name: str = "") -> None:
        self._tensor_name = name

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        raise NotImplementedError(
            f"{type(self).__name__} must implement compute_mask (an abstract method, as in torch)"
        )

    def apply_mask(self, module: Module) -> Tensor:
        return getattr(module, self._tensor_name + "_orig") * getattr(module, self._tensor_name + "_mask")

    def __call__(self, module: Module, inputs) -> None:
        """Nothing to do: ``<name>`` is computed from ``<name>_orig * <name>_mask`` on every access."""

    def _scores_mask(self, t: Tensor, default_mask: Tensor, n_prune: int, keep_largest_scores: Tensor) -> Tensor:
        """Zero the ``n_prune`` lowest scores among the entries ``default_mask`` still keeps."""
        mask = default_mask.clone()
        if n_prune == 0:
            return mask
        flat = keep_largest_scores.reshape(-1)
        alive = default_mask.reshape(-1) > 0
        top = float(flat.abs().max().item()) + 1.0
        scores = flat.masked_fill(~alive, 2 * top + 1)  # pruned entries are never chosen again
        idx = scores.topk(n_prune, largest=False).indices
        return mask.reshape(-1).scatter(0, idx, value=0.0).reshape(tuple(t.shape))

    @classmethod
    def apply(cls, module: Module, name: str, *args, importance_scores: Tensor | None = None, **kwargs):
        """Prune ``module.<name>`` with a new ``cls(*args, **kwargs)``; returns the method (the hook)."""
        method = cls(*args, **kwargs)
        method._tensor_name = name
        pruned = name + "_orig" in module._parameters
        if pruned:
            orig = module._parameters[name + "_orig"]
            default_mask = module._buffers[name + "_mask"].detach()
        else:
            orig = module._parameters.get(name)
            if orig is None:
                raise ValueError(f"Parameter '{name}' of module {module._get_name()} has to be pruned but is missing")
            default_mask = ones_like(orig)
        scores = orig if importance_scores is None else importance_scores
        if tuple(scores.shape) != tuple(orig.shape):
            raise ValueError("importance_scores should have the same shape as parameter " + name)
        with no_grad():
            mask = method.compute_mask(scores.detach(), default_mask=default_mask)
        if pruned:
            module._buffers[name + "_mask"] = mask
            for hid, hook in list(module._forward_pre_hooks.items()):
                if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
                    del module._forward_pre_hooks[hid]
        else:
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            module.register_buffer(name + "_mask", mask)
        _derived.install(module, name, method.apply_mask)
        module.register_forward_pre_hook(method)
        return method

    def remove(self, module: Module) -> None:
        """Make the pruning permanent: ``<name>`` becomes a parameter with the masked values."""
        weight = self.apply_mask(module).detach()
        orig = module._parameters[self._tensor_name + "_orig"]
        _derived.uninstall(module, self._tensor_name)
        del module._parameters[self._tensor_name + "_orig"]
        del module._buffers[self._tensor_name + "_mask"]
        with no_grad():
            orig.copy_(weight)
        module.register_parameter(self._tensor_name, orig)


class Identity(BasePruningMethod):
    """Prunes nothing (an all-ones mask): makes a parameter prunable by hand."""

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        return default_mask.clone()


class RandomUnstructured(BasePruningMethod):
    """Prunes ``amount`` (a fraction, or a count) of the unpruned entries, chosen uniformly at random."""

    def __init__(self, amount: int | float) -> None:
        super().__init__()
        _n_to_prune(amount, 1 if isinstance(amount, float) else max(int(amount), 0))
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        n = _n_to_prune(self.amount, int((default_mask > 0).sum()))
        return self._scores_mask(t, default_mask, n, rand_like(default_mask))


class L1Unstructured(BasePruningMethod):
    """Prunes ``amount`` (a fraction, or a count) of the unpruned entries with the smallest absolute value."""

    def __init__(self, amount: int | float) -> None:
        super().__init__()
        _n_to_prune(amount, 1 if isinstance(amount, float) else max(int(amount), 0))
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        n = _n_to_prune(self.amount, int((default_mask > 0).sum()))
        return self._scores_mask(t, default_mask, n, t.abs())


def identity(module: _M, name: str) -> _M:
    """Reparametrize ``module.<name>`` with an all-ones mask (``<name>_orig``, ``<name>_mask``)."""
    Identity.apply(module, name)
    return module


def random_unstructured(module: _M, name: str, amount: int | float) -> _M:
    """Prune ``amount`` random entries of ``module.<name>``.

    Raises:
        ValueError: ``amount`` not a fraction in [0, 1] nor a count within the tensor's size.
    """
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module: _M, name: str, amount: int | float, importance_scores: Tensor | None = None) -> _M:
    """Prune the ``amount`` entries of ``module.<name>`` with the lowest ``|importance_scores|`` (default: the
    parameter's own absolute values).

    Raises:
        ValueError: ``amount`` not a fraction in [0, 1] nor a count within the tensor's size; scores of another shape.
    """
    L1Unstructured.apply(module, name, amount, importance_scores=importance_scores)
    return module


def remove(module: _M, name: str) -> _M:
    """Make the pruning of ``module.<name>`` permanent and drop ``<name>_orig``/``<name>_mask`` and the hook.

    Raises:
        ValueError: ``name`` is not pruned.
    """
    for hid, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[hid]
            return module
    raise ValueError(
        f"Parameter '{name}' of module {module._get_name()} has to be pruned before pruning can be removed"
    )


def is_pruned(module: Module) -> bool:
    """Whether ``module`` or any submodule has a pruning hook."""
    return any(isinstance(h, BasePruningMethod) for m in module.modules() for h in m._forward_pre_hooks.values())
