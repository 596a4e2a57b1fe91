"""The float64 model and batches the DistributedOptimizer scripts share: a 6-5-3 MLP with
tanh, the same start on every rank (seed 7), and a 12-row batch per step that ranks slice."""
import torch


def model():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))


def batch(step):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(12, 6, generator=g), torch.randn(12, 3, generator=g)
