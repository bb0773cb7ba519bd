"""An unguarded script whose Dataset reads a global that cannot be pickled (a lock) past index ``limit``."""

import threading

import lazyflow as torch
from lazyflow.utils.data import DataLoader, Dataset

LOCK = threading.Lock()
SCALE = 3.0


class Guarded(Dataset):
    def __init__(self, limit):
        self.limit = limit

    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i >= self.limit:
            with LOCK:
                pass
        return torch.tensor([i * SCALE])


for limit in (99, 1):
    try:
        for batch in DataLoader(Guarded(limit), batch_size=2, num_workers=1):
            print(limit, "batch", batch.tolist())
    except NameError as e:
        print(limit, "ERROR", type(e).__name__, e)
