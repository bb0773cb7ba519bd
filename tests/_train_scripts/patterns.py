"""An unguarded script whose Dataset depends on the ways scripts set up globals: a `with` block, an optional
import, an import under `if`, a dataclass config, a class attribute read at definition time, an instance of a
script class. Its top level appends one line to a marker file, so a test can count how often it ran."""

import json
import os
import sys
from dataclasses import dataclass

import lazyflow as torch
from lazyflow.utils.data import DataLoader, Dataset

try:
    import no_such_module_for_lazyflow_tests as optional_dep
except ImportError:
    optional_dep = None

if True:
    import numpy as np

SCALE = 2
with open(sys.argv[1]) as f:
    VOCAB = json.load(f)


@dataclass
class Config:
    offset: float = 0.5


class Lookup:
    size = SCALE * 10  # read when the class statement runs

    def __init__(self, table):
        self.table = table


TABLE = Lookup({w: i for i, w in enumerate(VOCAB)})
CFG = Config()


class Words(Dataset):
    def __len__(self):
        return len(VOCAB)

    def __getitem__(self, i):
        assert optional_dep is None
        v = TABLE.table[VOCAB[i]] * SCALE + CFG.offset + Lookup.size
        return torch.tensor(np.float32(v))


with open(sys.argv[2], "a") as marker:
    marker.write(f"{os.getpid()}\n")
out = [b.tolist() for b in DataLoader(Words(), batch_size=2, num_workers=2)]
print("RESULT", json.dumps(out))
