"""TorchScript models and .npz data sets for distml's user-model tests, made with the same
torch that distml links. Usage: make_models.py OUT_DIR (writes the files listed in main())."""
import os
import sys

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../bench"))
from ddp_train import LeNet5  # noqa: E402  the copy of nn/lenet5.cc the DDP baseline trains


class CnnWithBatchNorm(nn.Module):
    """A small CNN with BatchNorm for 28x28 single-channel images, stored as [N, 28, 28]. The
    convolution has no bias, as usual before BatchNorm: BatchNorm subtracts the batch mean, so
    such a bias gets a zero gradient and moves by rounding alone (which trajectory comparisons,
    measured against the distance travelled, would count as a large relative error)."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 5, stride=2, bias=False)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 12 * 12, classes)

    def forward(self, x):
        x = x.reshape(x.shape[0], 1, 28, 28)
        return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))


class Images(nn.Module):
    """Takes samples as stored, [N, 28, 28], and gives `net` the [N, 1, 28, 28] it expects."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x.reshape(x.shape[0], 1, 28, 28))


class MnistCnn(nn.Module):
    """The CNN of the MNIST .npz benchmark: two conv-BN-ReLU-pool blocks and a linear head."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 16, 3, padding=1)
        self.b1 = nn.BatchNorm2d(16)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1)
        self.b2 = nn.BatchNorm2d(32)
        self.fc = nn.Linear(32 * 7 * 7, 10)

    def forward(self, x):
        x = x.reshape(x.shape[0], 1, 28, 28)
        x = torch.max_pool2d(torch.relu(self.b1(self.c1(x))), 2)
        x = torch.max_pool2d(torch.relu(self.b2(self.c2(x))), 2)
        return self.fc(x.flatten(1))


class Linear(nn.Module):
    def __init__(self, features: int, outputs: int):
        super().__init__()
        self.linear = nn.Linear(features, outputs)

    def forward(self, x):
        return self.linear(x)


class DropoutMlp(nn.Module):
    """A model that draws random numbers as it trains: dropout between two layers."""

    def __init__(self, features: int, classes: int):
        super().__init__()
        self.hidden = nn.Linear(features, 64)
        self.dropout = nn.Dropout(0.5)
        self.out = nn.Linear(64, classes)

    def forward(self, x):
        return self.out(self.dropout(torch.relu(self.hidden(x.flatten(1)))))


class HuberLossModel(nn.Module):
    """A model with its own objective: forward(x, y) returns the Huber loss of a linear fit."""

    def __init__(self, features: int):
        super().__init__()
        self.linear = nn.Linear(features, 1)

    def forward(self, x, y):
        return torch.nn.functional.huber_loss(self.linear(x).squeeze(1), y)


class ReluBetweenChildren(nn.Module):
    """b(relu(a(x))): the ReLU is written in forward, between the children."""

    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.a = nn.Linear(28 * 28, 32)
        self.b = nn.Linear(32, 10)

    def forward(self, x):
        return self.b(torch.relu(self.a(self.flatten(x))))


class ScaleOnTop(nn.Module):
    """A parameter of the top module, outside every child."""

    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.a = nn.Linear(28 * 28, 10)
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x):
        return self.a(self.flatten(x)) * self.scale


def script(module: nn.Module, path: str):
    torch.jit.script(module).save(path)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    script(CnnWithBatchNorm(), f"{out}/cnn_bn.pt")
    script(Images(LeNet5()), f"{out}/lenet5.pt")
    script(MnistCnn(), f"{out}/mnist_cnn.pt")
    script(Linear(8, 1), f"{out}/linear8.pt")
    script(DropoutMlp(28 * 28, 10), f"{out}/dropout_mlp.pt")
    script(HuberLossModel(8), f"{out}/huber8.pt")
    # Sequences of layers that a pipeline cuts at the top level.
    script(nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 32), nn.BatchNorm1d(32), nn.ReLU(),
                         nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 10)), f"{out}/seq_bn.pt")
    script(nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 32), nn.ReLU(), nn.Dropout(0.5),
                         nn.Linear(32, 10)), f"{out}/seq_dropout.pt")
    # Dropout in each of two blocks, so that both stages of a 2-stage cut draw.
    script(nn.Sequential(nn.Flatten(),
                         nn.Sequential(nn.Dropout(0.5), nn.Linear(28 * 28, 32), nn.ReLU()),
                         nn.Sequential(nn.Dropout(0.5), nn.Linear(32, 10))),
           f"{out}/seq_dropout_blocks.pt")
    # forward does more than run the children in order: a pipeline must refuse to cut these.
    script(ReluBetweenChildren(), f"{out}/relu_between.pt")
    script(ScaleOnTop(), f"{out}/scale_on_top.pt")

    rng = np.random.default_rng(0)
    # Images whose class is their first pixel's decile, as the trainer tests' synthetic data.
    x = rng.integers(0, 256, size=(600, 28, 28)).astype(np.float32) / 255
    y = (x[:, 0, 0] * 9.99).astype(np.int64)
    np.savez(f"{out}/images.npz", x=x, y=y)
    np.savez_compressed(f"{out}/images_compressed.npz", x=x, y=y)
    # A linear problem y = x w + b without noise, and its binary version.
    x = rng.standard_normal((800, 8)).astype(np.float32)
    w = np.linspace(-1, 1, 8).astype(np.float32)
    y = x @ w + 0.5
    np.savez(f"{out}/linear.npz", x=x, y=y.astype(np.float32))
    np.save(f"{out}/linear_weights.npy", np.concatenate([w, [0.5]]))
    np.savez(f"{out}/binary.npz", x=x, y=(y > 0.5).astype(np.float32))


if __name__ == "__main__":
    main()
