"""Shared by the tests of passes on graphs with dynamic shapes (test_context, test_other_sizes)."""

from __future__ import annotations

import pytest
import torch
from torch import nn


class MeanBySize(nn.Module):
    """``x.sum(1) / x.shape[1]``: the graph divides by a symbolic size (one a wrong pass can
    make the example's constant)."""

    def forward(self, x):
        return x.sum(1) / x.shape[1]


def assert_compile_fails(pass_cls: type, pattern: str, x: torch.Tensor | None = None) -> None:
    """``torch.compile(MeanBySize(), backend="fxpasses", dynamic=True)`` running ``pass_cls``
    with numeric verification fails on its first call, with a message matching ``pattern``."""
    torch._dynamo.reset()
    compiled = torch.compile(
        MeanBySize(), backend="fxpasses", dynamic=True, options={"pipeline": [pass_cls], "verify": "numeric"}
    )
    try:
        with pytest.raises(Exception, match=pattern):
            compiled(torch.randn(2, 6, 8) if x is None else x)
    finally:
        torch._dynamo.reset()
