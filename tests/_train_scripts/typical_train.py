"""A typical PyTorch training script, written for torch, with no `if __name__ == "__main__":` guard (the style of
torch's examples). tests/test_typical_script.py runs it as is and with only its imports changed to lazyflow."""

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
V, H, T = 16, 32, 12


class ShiftByOne(Dataset):
    """Predict the previous token."""

    def __init__(self, n):
        g = torch.Generator().manual_seed(1)
        self.x = torch.randint(0, V, (n, T), generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        x = self.x[i]
        y = torch.roll(x, 1)
        y[0] = 0
        return x, y


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, H)
        self.rnn = nn.LSTM(H, H, num_layers=2, batch_first=True, dropout=0.1)
        layer = nn.TransformerEncoderLayer(H, nhead=4, dim_feedforward=2 * H, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, num_layers=1)
        self.head = nn.Linear(H, V)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.head(self.enc(h))


model = LM().to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
scaler = torch.amp.GradScaler(device.type)
loader = DataLoader(ShiftByOne(192), batch_size=64, shuffle=True, num_workers=2)
# the top level runs once: workers rebuild only the definitions (a marker line per run)
with open(sys.argv[2], "a") as marker:
    marker.write(f"{os.getpid()}\n")
print(f"params {sum(p.numel() for p in model.parameters())} on {device}, cuda {torch.cuda.is_available()}")
EPOCHS = 3
for epoch in range(EPOCHS):
    model.train()
    total = 0.0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        with torch.autocast(device_type=device.type, enabled=torch.cuda.is_available()):
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        total += loss.item() * len(x)
    sched.step()
    print(f"epoch {epoch} loss {total / len(loader.dataset):.4f} grad-norm {norm:.3f} lr {sched.get_last_lr()[0]:.5f}")
path = sys.argv[1]
torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(), "epoch": EPOCHS}, path)
ck = torch.load(path)
fresh = LM().to(device)
fresh.load_state_dict(ck["model"])
opt2 = torch.optim.AdamW(fresh.parameters(), lr=1e-2)
opt2.load_state_dict(ck["opt"])
model.eval()
fresh.eval()
with torch.no_grad():
    x, _ = next(iter(loader))
    same = torch.allclose(model(x), fresh(x))
print(f"resumed epoch {ck['epoch']} same outputs {same} steps {opt2.state_dict()['state'][0]['step']}")
