"""Model factories the corpus's [model] sections name (good and bad ones)."""

import torch
from torch import nn

NOT_CALLABLE = 3


def convnet():
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).eval()


def raises():
    raise RuntimeError("weights not found")


def returns_int():
    return 3
