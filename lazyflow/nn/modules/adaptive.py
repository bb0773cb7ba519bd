"""``AdaptiveLogSoftmaxWithLoss`` (Grave et al.'s efficient softmax approximation), torch's parameters and outputs.

torch runs each tail cluster only on the rows whose target falls in it (data-dependent shapes); here every cluster
runs on the whole batch and a mask picks each row's term, so the output, the loss and their gradients are torch's
and the forward also traces under ``lf.compile`` (more FLOPs for the tails, the same numbers).
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Sequence

from ... import _functional as _F
from ..._core.errors import ShapeError
from ..._tensor import Tensor
from .. import functional as F
from ..functional._linear import _check_indices
from ..module import Module
from .container import ModuleList, Sequential
from .linear import Linear

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Adaptive softmax: a head over the ``cutoffs[0]`` most frequent classes plus one entry per tail cluster, and a
    low-rank projection per cluster (sizes ``in_features // div_value ** (i + 1)``).

    Args:
        in_features, n_classes: input size and number of classes.
        cutoffs: increasing class indices in ``[1, n_classes - 1]`` that split the clusters.
        div_value: the tails' size ratio.
        head_bias: give the head a bias.
    Returns (on call with ``input`` ``(N, in_features)`` and ``target`` ``(N,)``):
        ``(output, loss)``: each row's target log-probability and the mean negative log-likelihood.
    Raises:
        ValueError: invalid cutoffs. ShapeError (on call): shapes that disagree. IndexOutOfRangeError: a target
        outside ``[0, n_classes)``.
    """

    def __init__(
        self,
        in_features: int,
        n_classes: int,
        cutoffs: Sequence[int],
        div_value: float = 4.0,
        head_bias: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (
            cutoffs != sorted(cutoffs)
            or min(cutoffs) <= 0
            or max(cutoffs) > (n_classes - 1)
            or len(set(cutoffs)) != len(cutoffs)
            or any(int(c) != c for c in cutoffs)
        ):
            raise ValueError(
                "cutoffs should be a sequence of unique, positive integers sorted in an increasing order, where "
                "each value is between 1 and n_classes-1"
            )
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        kw = {"device": device, "dtype": dtype}
        self.head = Linear(in_features, self.head_size, bias=head_bias, **kw)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hsz, bias=False, **kw), Linear(hsz, osz, bias=False, **kw)))

    def reset_parameters(self) -> None:
        """Re-draw the head's and the tails' parameters."""
        self.head.reset_parameters()
        for m in self.tail.modules():
            if isinstance(m, Linear):
                m.reset_parameters()

    def forward(self, input_: Tensor, target_: Tensor) -> _ASMoutput:
        if target_.ndim == 1:
            if input_.ndim != 2 or input_.shape[0] != target_.shape[0]:
                raise ShapeError(
                    f"AdaptiveLogSoftmaxWithLoss: a 1D target expects a 2D input with the same batch size, got "
                    f"input {list(input_.shape)} and target {list(target_.shape)}"
                )
        elif target_.ndim == 0:
            if input_.ndim != 1:
                raise ShapeError(
                    f"AdaptiveLogSoftmaxWithLoss: a 0D target expects a 1D input, got {list(input_.shape)}"
                )
        else:
            raise ShapeError("AdaptiveLogSoftmaxWithLoss: 0D or 1D target tensor expected, multi-target not supported")
        batched = target_.ndim > 0
        x = input_ if batched else input_.unsqueeze(0)
        target = (target_ if batched else target_.unsqueeze(0)).long()
        _check_indices(target, self.n_classes, "AdaptiveLogSoftmaxWithLoss: target")
        output = x.new_zeros(target.shape[0])
        gather = target
        for i in range(self.n_clusters):
            low, high = self.cutoffs[i], self.cutoffs[i + 1]
            mask = (target >= low) & (target < high)
            logprob = F.log_softmax(self.tail[i](x), dim=1)
            local = logprob.gather(1, (target - low).clamp(0, high - low - 1).unsqueeze(1)).squeeze(1)
            output = output + _F.where(mask, local, 0.0)
            gather = _F.where(mask, self.shortlist_size + i, gather)
        head_logprob = F.log_softmax(self.head(x), dim=1)
        output = output + head_logprob.gather(1, gather.unsqueeze(1)).squeeze(1)
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _full_log_prob(self, x: Tensor) -> Tensor:
        head_logprob = F.log_softmax(self.head(x), dim=1)
        parts = [head_logprob[:, : self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster = F.log_softmax(self.tail[i](x), dim=1)
            parts.append(cluster + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return _F.cat(parts, 1)

    def log_prob(self, input: Tensor) -> Tensor:
        """Log-probabilities of every class: ``(N, n_classes)`` (or ``(n_classes,)`` unbatched)."""
        batched = input.ndim > 1
        out = self._full_log_prob(input if batched else input.unsqueeze(0))
        return out if batched else out.squeeze(0)

    def predict(self, input: Tensor) -> Tensor:
        """The most likely class of each row (the argmax of :meth:`log_prob`)."""
        return self.log_prob(input).argmax(-1)
