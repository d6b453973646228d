"""Model factories for the example run configs (``factory = "models:<name>"``).

Every factory builds its model from scratch with a fixed seed (the caller's RNG state is left
untouched), returns it in eval mode, and returns a module whose ``forward`` takes positional
tensors and returns one tensor, so that capture and output comparison are simple.

- ``convnet``: float32 ``[N, 3, H, W]`` -> float32 ``[N, num_classes]``
- ``mlp``: float32 ``[N, in_features]`` -> float32 ``[N, out_features]``
- ``gpt2``: int64 token ids ``[N, T]`` in ``[0, vocab_size)``, ``T <= n_positions`` -> float32
  logits ``[N, T, vocab_size]``
- ``bert``: int64 token ids ``[N, T]`` in ``[0, vocab_size)``, ``T <= max_position_embeddings``
  -> float32 last hidden state ``[N, T, hidden_size]``

``gpt2`` and ``bert`` also take an optional ``attention_mask`` (int64 ``[N, T]``, 1 = attend,
0 = padding), positionally or as a keyword (``examples/gpt2_kwargs.toml``).

``gpt2`` and ``bert`` are built by ``transformers`` from a config with random weights: nothing
is downloaded. Capture status with torch 2.13 / transformers 5.x: every model captures with
``export`` and ``dynamo``; ``gpt2`` and ``bert`` do not capture with ``symbolic_trace``
(HF models branch on traced values: GPT-2 fails with "symbolically traced variables cannot be
used as inputs to control flow", BERT with "slice indices must be integers or None").
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import torch
from torch import nn

__all__ = ["convnet", "deep_convnet", "mlp", "gpt2", "bert"]


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """Seed the global (CPU) RNG with ``seed`` inside; the caller's RNG state is restored after."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


class _ConvBlock(nn.Sequential):
    def __init__(self, cin: int, cout: int, *, bias: bool, stride: int = 1) -> None:
        super().__init__(
            nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=bias),
            nn.BatchNorm2d(cout),
            nn.ReLU(),
        )


class ConvNet(nn.Module):
    """Three Conv2d+BatchNorm2d+ReLU blocks (two without conv bias), pooling, Dropout, Linear."""

    def __init__(self, num_classes: int = 10, width: int = 16) -> None:
        super().__init__()
        self.features = nn.Sequential(
            _ConvBlock(3, width, bias=True),
            _ConvBlock(width, 2 * width, bias=False, stride=2),
            _ConvBlock(2 * width, 2 * width, bias=False),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(0.2)
        self.head = nn.Linear(2 * width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.features(x)).flatten(1)
        return self.head(self.dropout(x))


def convnet(num_classes: int = 10, width: int = 16, seed: int = 0) -> nn.Module:
    """A small CNN in eval mode, with non-trivial BatchNorm statistics (so fusion is visible).

    Input float32 ``[N, 3, H, W]``, output float32 ``[N, num_classes]``.
    """
    with _seeded(seed):
        model = ConvNet(num_classes, width)
        _visible_statistics(model, lambda w: w.copy_(torch.rand(w.numel()) + 0.5))
    return model.eval()


def _visible_statistics(model: nn.Module, set_weight: Callable[[torch.Tensor], Any]) -> None:
    """Give every ``BatchNorm2d`` of ``model`` running statistics and a bias that fusion
    changes visibly, and its weight by ``set_weight`` (called on ``weight.data``), drawing from
    torch's generator in that order."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            n = m.num_features
            m.running_mean.copy_(torch.randn(n) * 0.5)
            m.running_var.copy_(torch.rand(n) + 0.5)
            set_weight(m.weight.data)
            m.bias.data.copy_(torch.randn(n) * 0.1)


class DeepConvNet(nn.Module):
    """``blocks`` residual blocks ``x + relu(bn(conv(x)))`` at one width: a graph as deep as
    an LLM's (about 10 ``torch.export`` nodes a block) from a small model."""

    def __init__(self, blocks: int, width: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Conv2d(width, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
            for _ in range(blocks)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = x + block(x)
        return x


def deep_convnet(blocks: int = 250, width: int = 8, seed: int = 0) -> nn.Module:
    """A :class:`DeepConvNet` in eval mode, with BatchNorm statistics that fusion changes
    visibly and small gains (``weight`` in [0.002, 0.01]), so that outputs stay of the
    input's size at any depth. Input float32 ``[N, width, H, W]``, output the same shape."""
    with _seeded(seed):
        model = DeepConvNet(blocks, width)
        _visible_statistics(model, lambda w: w.uniform_(0.002, 0.01))
    return model.eval()


def mlp(in_features: int = 32, hidden: int = 64, out_features: int = 10, seed: int = 0) -> nn.Module:
    """Linear-ReLU-Dropout-Linear in eval mode. Input float32 ``[N, in_features]``."""
    with _seeded(seed):
        model = nn.Sequential(
            nn.Linear(in_features, hidden), nn.ReLU(), nn.Dropout(0.1), nn.Linear(hidden, out_features)
        )
    return model.eval()


class _TensorOut(nn.Module):
    """Wraps a ``transformers`` model: ``forward(input_ids, attention_mask=None)`` returns one
    output field. Captured with keyword inputs (``inputs = {input_ids = {...},
    attention_mask = {...}}`` in a config, ``torch.export.export(model, (), {"input_ids": ids,
    "attention_mask": mask})``), the mask is an input of the graph."""

    def __init__(self, model: nn.Module, field: str) -> None:
        super().__init__()
        self.model = model
        self.field = field

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        return getattr(self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=True), self.field)


def gpt2(
    n_layer: int = 2,
    n_embd: int = 128,
    n_head: int = 4,
    vocab_size: int = 1000,
    n_positions: int = 128,
    seed: int = 0,
) -> nn.Module:
    """A randomly initialised GPT-2 LM (``transformers``, no download) returning logits.

    Input int64 ``[N, T]`` (``T <= n_positions``); output float32 ``[N, T, vocab_size]``.
    Built with ``use_cache=False`` (no key/value cache outputs) in eval mode.
    """
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        vocab_size=vocab_size,
        n_positions=n_positions,
        bos_token_id=vocab_size - 1,
        eos_token_id=vocab_size - 1,
        use_cache=False,
    )
    with _seeded(seed):
        model = GPT2LMHeadModel(config)
    return _TensorOut(model, "logits").eval()


def bert(
    num_hidden_layers: int = 2,
    hidden_size: int = 128,
    num_attention_heads: int = 4,
    intermediate_size: int = 256,
    vocab_size: int = 1000,
    max_position_embeddings: int = 128,
    seed: int = 0,
) -> nn.Module:
    """A randomly initialised BERT encoder (``transformers``, no download).

    Input int64 ``[N, T]`` (``T <= max_position_embeddings``); output float32
    ``[N, T, hidden_size]`` (``last_hidden_state``); no pooling layer. Eval mode.
    """
    from transformers import BertConfig, BertModel

    config = BertConfig(
        num_hidden_layers=num_hidden_layers,
        hidden_size=hidden_size,
        num_attention_heads=num_attention_heads,
        intermediate_size=intermediate_size,
        vocab_size=vocab_size,
        max_position_embeddings=max_position_embeddings,
    )
    with _seeded(seed):
        model = BertModel(config, add_pooling_layer=False)
    return _TensorOut(model, "last_hidden_state").eval()
