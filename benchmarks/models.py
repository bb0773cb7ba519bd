"""Benchmark models written once and built against either ``torch.nn`` or ``lazyflow.nn`` (only the import differs).

``build(nn, name)`` returns the model; the same code runs on both frameworks, which is the point of lazyflow.
"""

from __future__ import annotations


def mlp(nn):
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))


def small_cnn(nn):
    """Two Conv-BN-ReLU blocks, a pool and a Linear classifier, for 32x32x3 inputs."""
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.BatchNorm2d(64),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * 16 * 16, 10),
    )


def transformer(nn, d_model=256, nhead=4, ffn=1024, layers=4, vocab=1000):
    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, d_model)
            layer = nn.TransformerEncoderLayer(d_model, nhead, ffn, dropout=0.0, batch_first=True, norm_first=True)
            self.enc = nn.TransformerEncoder(layer, layers)
            self.head = nn.Linear(d_model, vocab)

        def forward(self, tokens):
            return self.head(self.enc(self.emb(tokens)))

    return Encoder()


def _resnet(nn, block, layers, num_classes=1000):
    class BasicBlock(nn.Module):
        expansion = 1

        def __init__(self, cin, planes, stride=1, down=None):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU()
            self.downsample = down

        def forward(self, x):
            idt = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return self.relu(out + idt)

    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, cin, planes, stride=1, down=None):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(planes * 4)
            self.relu = nn.ReLU()
            self.downsample = down

        def forward(self, x):
            idt = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            return self.relu(out + idt)

    B = BasicBlock if block == "basic" else Bottleneck

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.inplanes = 64
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU()
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            self.layer1 = self._make(64, layers[0])
            self.layer2 = self._make(128, layers[1], 2)
            self.layer3 = self._make(256, layers[2], 2)
            self.layer4 = self._make(512, layers[3], 2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(512 * B.expansion, num_classes)

        def _make(self, planes, n, stride=1):
            down = None
            if stride != 1 or self.inplanes != planes * B.expansion:
                down = nn.Sequential(
                    nn.Conv2d(self.inplanes, planes * B.expansion, 1, stride, bias=False),
                    nn.BatchNorm2d(planes * B.expansion),
                )
            blocks = [B(self.inplanes, planes, stride, down)]
            self.inplanes = planes * B.expansion
            blocks += [B(self.inplanes, planes) for _ in range(1, n)]
            return nn.Sequential(*blocks)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(self.avgpool(x).flatten(1))

    return ResNet()


def resnet18(nn):
    return _resnet(nn, "basic", [2, 2, 2, 2])


def resnet50(nn):
    return _resnet(nn, "bottleneck", [3, 4, 6, 3])


def gpt(nn, n_layer=12, n_head=12, n_embd=768, vocab_size=50304, block_size=1024):
    """nanoGPT's GPT-2 (124M at the defaults): token and position Embeddings, pre-LayerNorm blocks of causal
    self-attention and a GELU MLP, a LayerNorm and a bias-free head tied to the token embedding; its own
    init (N(0, 0.02), zero biases, output projections scaled by 1 / sqrt(2 * n_layer))."""
    F = nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)
            self.resid_dropout = nn.Dropout(0.0)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.c_attn(x).split(n_embd, dim=2)
            q, k, v = (z.view(b, t, n_head, c // n_head).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c)))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(n_embd, 4 * n_embd)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * n_embd, n_embd)
            self.dropout = nn.Dropout(0.0)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(n_embd)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(
                dict(
                    wte=nn.Embedding(vocab_size, n_embd),
                    wpe=nn.Embedding(block_size, n_embd),
                    drop=nn.Dropout(0.0),
                    h=nn.ModuleList([Block() for _ in range(n_layer)]),
                    ln_f=nn.LayerNorm(n_embd),
                )
            )
            self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
            self.transformer.wte.weight = self.lm_head.weight  # weight tying
            self.apply(self._init_weights)
            for name, p in self.named_parameters():
                if name.endswith("c_proj.weight"):
                    nn.init.normal_(p, mean=0.0, std=0.02 / (2 * n_layer) ** 0.5)

        @staticmethod
        def _init_weights(module):
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx):
            t = idx.shape[1]
            pos = self.transformer.wpe.weight[:t]
            x = self.transformer.drop(self.transformer.wte(idx) + pos)
            for block in self.transformer.h:
                x = block(x)
            return self.lm_head(self.transformer.ln_f(x))

    return GPT()


MODELS = {
    "mlp": mlp,
    "small_cnn": small_cnn,
    "transformer": transformer,
    "resnet18": resnet18,
    "resnet50": resnet50,
    "gpt": gpt,
}


def build(nn, name):
    return MODELS[name](nn)
