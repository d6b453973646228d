"""The bundled example model of ``fxpasses run`` with no config: a small CNN classifier.

Input: ``(N, 3, 32, 32)`` float32 images; output: ``(N, 10)`` float32 logits. It has what the
default pipeline removes: eval-mode dropout, conv + batch-norm pairs (BN with non-trivial
running statistics), a multiply by one, and a constant subexpression.
"""

from __future__ import annotations

import torch
from torch import nn


class ExampleNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(32, 10)
        self.register_buffer("scale", torch.ones(10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn1(self.conv1(x)))
        x = nn.functional.max_pool2d(x, 2)
        x = torch.relu(self.bn2(self.conv2(x)))
        x = x.mean(dim=(2, 3))
        x = self.drop(x) * 1
        return self.fc(x) * (self.scale * 2.0)


def convnet() -> ExampleNet:
    """An :class:`ExampleNet` with seeded weights and batch-norm statistics, in eval mode."""
    gen = torch.Generator().manual_seed(0)
    model = ExampleNet()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.2)
        for bn in (model.bn1, model.bn2):
            bn.running_mean.copy_(torch.randn(bn.num_features, generator=gen) * 0.1)
            bn.running_var.copy_(torch.rand(bn.num_features, generator=gen) + 0.5)
    return model.eval()
