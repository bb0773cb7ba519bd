"""``lf.nn.parallel``: ``DistributedDataParallel`` (one process per device, gradients averaged across
processes) and ``DataParallel`` (one process, the batch split over its local devices)."""

from .data_parallel import DataParallel
from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel", "DataParallel"]
