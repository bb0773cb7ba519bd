"""torch.distributions.Distribution: the shapes, validation and defaults every distribution shares."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from .._core.context import state
from .._core.errors import ValueRangeError
from .._core.size import Size
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from . import constraints
from .utils import extended, lazy_property

__all__ = ["Distribution"]


def _all_true(valid: Tensor) -> bool:
    """Whether every entry holds; inside a trace values are unknown, so validation is skipped there."""
    if state.tracing:
        return True
    return bool(valid.all())


class _Abstract:
    """A class attribute every subclass defines (as a value or a property); reading it on an instance of a class
    that does not raises NotImplementedError, as torch's abstract properties do."""

    def __init__(self, what: str):
        self.what = what

    def __get__(self, instance, owner=None) -> Any:
        if instance is None:
            return self
        raise NotImplementedError(f"{type(instance).__name__} does not implement {self.what}")

    def __set_name__(self, owner, name) -> None:
        self.what = name


class Distribution:
    """The base class of probability distributions (``torch.distributions.Distribution``).

    ``batch_shape`` indexes independent distributions, ``event_shape`` is the shape of one draw; a sample has shape
    ``sample_shape + batch_shape + event_shape``. With validation on (the default, as in torch) bad parameters and
    out-of-support values passed to ``log_prob`` raise ``ValueError``; inside ``lf.compile`` values are not known
    while tracing, so validation runs in eager mode only.
    """

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Switch argument validation on or off for every distribution created afterwards.

        Raises:
            ValueError: ``value`` is not a bool.
        """
        if value not in [True, False]:
            raise ValueError(f"set_default_validate_args expects True or False, got {value!r}")
        Distribution._validate_args = value

    arg_constraints: Any = _Abstract("arg_constraints")
    support: Any = _Abstract("support")
    mean: Any = _Abstract("mean")
    mode: Any = _Abstract("mode")
    variance: Any = _Abstract("variance")

    def __init__(
        self, batch_shape: Sequence[int] = (), event_shape: Sequence[int] = (), validate_args: bool | None = None
    ):
        self._batch_shape = Size(tuple(batch_shape))
        self._event_shape = Size(tuple(event_shape))
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:
                arg_constraints = {}
                warnings.warn(
                    f"{self.__class__} does not define `arg_constraints`. Please set `arg_constraints = {{}}` or "
                    "initialize the distribution with `validate_args=False` to turn off validation.",
                    stacklevel=2,
                )
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                if param not in self.__dict__ and isinstance(getattr(type(self), param, None), lazy_property):
                    continue  # skip checking lazily-constructed args
                value = getattr(self, param)
                if not _all_true(constraint.check(value)):
                    raise ValueRangeError(
                        f"Expected parameter {param} ({type(value).__name__} of shape {tuple(value.shape)}) of "
                        f"distribution {self!r} to satisfy the constraint {constraint!r}, but found invalid "
                        f"values:\n{value}"
                    )
        super().__init__()

    def expand(self, batch_shape, _instance=None):
        """A new distribution with parameters expanded to ``batch_shape`` (no copy of the data)."""
        raise NotImplementedError(f"{type(self).__name__}.expand is not implemented")

    @property
    def batch_shape(self) -> Size:
        """The shape over which parameters are batched."""
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        """The shape of a single sample (without batching)."""
        return self._event_shape

    @property
    def stddev(self) -> Tensor:
        """The standard deviation: ``variance.sqrt()``."""
        return self.variance.sqrt()

    def sample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        """A draw of shape ``sample_shape + batch_shape + event_shape``, outside autograd."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        """A reparameterised draw (gradients flow to the parameters) where ``has_rsample``."""
        raise NotImplementedError(f"{type(self).__name__} has no rsample (has_rsample is False); use sample()")

    def log_prob(self, value: Tensor) -> Tensor:
        """The log of the density (or mass) at ``value``."""
        raise NotImplementedError(f"{type(self).__name__}.log_prob is not implemented")

    def cdf(self, value: Tensor) -> Tensor:
        """The cumulative distribution function at ``value``."""
        raise NotImplementedError(f"{type(self).__name__}.cdf is not implemented")

    def icdf(self, value: Tensor) -> Tensor:
        """The inverse cumulative distribution function at ``value``."""
        raise NotImplementedError(f"{type(self).__name__}.icdf is not implemented")

    def enumerate_support(self, expand: bool = True) -> Tensor:
        """Every value of a discrete support, along a new leading dimension."""
        raise NotImplementedError(f"{type(self).__name__}.enumerate_support is not implemented")

    def entropy(self) -> Tensor:
        """The entropy, one value per batch entry."""
        raise NotImplementedError(f"{type(self).__name__}.entropy is not implemented")

    def perplexity(self) -> Tensor:
        """``exp(entropy())``."""
        return self.entropy().exp()

    def _extended_shape(self, sample_shape: Sequence[int] = Size()) -> Size:
        return extended(sample_shape, self._batch_shape, self._event_shape)

    def _validate_sample(self, value) -> None:
        if not isinstance(value, Tensor):
            raise ValueError(f"The value argument to log_prob must be a Tensor, got {type(value).__name__}")
        event_dim_start = len(value.shape) - len(self._event_shape)
        if tuple(value.shape[event_dim_start:]) != tuple(self._event_shape):
            raise ValueError(
                f"The right-most size of value must match event_shape: {tuple(value.shape)} vs "
                f"{tuple(self._event_shape)}."
            )
        actual_shape = tuple(value.shape)
        expected_shape = tuple(self._batch_shape) + tuple(self._event_shape)
        for i, j in zip(reversed(actual_shape), reversed(expected_shape)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(
                    f"Value is not broadcastable with batch_shape+event_shape: {actual_shape} vs {expected_shape}."
                )
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(
                f"{self.__class__} does not define `support` to enable sample validation. Please initialize the "
                "distribution with `validate_args=False` to turn off validation.",
                stacklevel=2,
            )
            return
        if support is None or constraints.is_dependent(support):
            return
        if not _all_true(support.check(value)):
            raise ValueRangeError(
                f"Expected value argument ({type(value).__name__} of shape {tuple(value.shape)}) to be within the "
                f"support ({support!r}) of the distribution {self!r}, but found invalid values:\n{value}"
            )

    def _get_checked_instance(self, cls, _instance=None) -> Any:
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom __init__ method must "
                "also define a custom .expand() method."
            )
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self) -> str:
        try:
            names = [k for k in self.arg_constraints if k in self.__dict__]
        except NotImplementedError:
            names = []
        args = ", ".join(
            f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else self.__dict__[p].size()}" for p in names
        )
        return f"{self.__class__.__name__}({args})"
