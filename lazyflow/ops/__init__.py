"""The op table (``REGISTRY``): importing this package registers every primitive."""

from . import creation, indexing, math, nn, nn_basic, random, shape  # noqa: F401  (registration side effects)
from .table import REGISTRY, OpDef, backward_fn, diff_positions, op, specialize

# Ops whose gradient is independent of the values of their differentiable operands (linear maps): the tape
# does not version-check those operands, so `g = h.clone(); h.add_(1)` then backward is legal, as in torch.
LINEAR_OPS = ("add", "sub", "neg", "copy", "copy_into", "cast", "reshape", "permute", "expand", "tile",
              "repeat_interleave", "cat", "stack", "split", "flip", "roll", "getitem", "sum", "mean", "cumsum",
              "pad", "tril", "triu", "diagonal", "index_select", "gather", "masked_fill")
# Ops linear in each operand separately: an operand's value is needed only for the OTHER operands' gradients,
# so `h * 2.0` then `h.add_(1)` is legal (torch saves only the scalar there).
MULTILINEAR_OPS = ("mul", "matmul", "einsum", "linear", "outer")
for _name in LINEAR_OPS:
    if _name in REGISTRY:
        REGISTRY[_name].linear = True
for _name in MULTILINEAR_OPS:
    if _name in REGISTRY:
        REGISTRY[_name].linear = "multi"

__all__ = ["REGISTRY", "OpDef", "op", "specialize", "backward_fn", "diff_positions"]
