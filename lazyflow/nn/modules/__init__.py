"""The layer classes; each file lists its public names in ``__all__``."""

from . import container, conv, normalization, pooling, transformer
from .container import *
from .conv import *
from .normalization import *
from .pooling import *
from .transformer import *

__all__ = [n for m in (container, conv, normalization, pooling, transformer) for n in m.__all__]
