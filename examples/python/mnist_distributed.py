"""An MNIST training script made distributed by the three lines marked "distml".

    distml launch -n 2 --engine gloo -- /usr/bin/python3 examples/python/mnist_distributed.py

(PYTHONPATH=build/python after `make python`; after `make install` nothing.) Each rank trains on
its own share of the rows; the optimizer averages the gradients over the ranks, so the replicas
stay equal and together see the whole data set in each epoch.
"""
import argparse

import numpy as np
import torch
import torch.nn.functional as F

import distml, distml.torch  # distml (1 of 3)


def idx(path):
    """An IDX file (MNIST's format) as a NumPy array."""
    raw = open(path, "rb").read()
    dims = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * dims).reshape(shape)


parser = argparse.ArgumentParser()
parser.add_argument("--data", default="data/mnist")
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--batch-size", type=int, default=64, help="per rank")
parser.add_argument("--max-steps", type=int, default=0, help="stop each epoch after this many")
args = parser.parse_args()

distml.init()  # distml (2 of 3): joins the ranks distml launch started
rank, size = distml.rank(), distml.size()
x = torch.from_numpy(idx(f"{args.data}/train-images-idx3-ubyte").astype(np.float32) / 255)
y = torch.from_numpy(idx(f"{args.data}/train-labels-idx1-ubyte").astype(np.int64))
mine = slice(rank * len(y) // size, (rank + 1) * len(y) // size)  # this rank's rows
x, y = x[mine], y[mine]

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 256), torch.nn.ReLU(),
                            torch.nn.Linear(256, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
# distml (3 of 3): the same start on every rank, and gradients averaged over the ranks
distml.torch.broadcast_parameters(model); optimizer = distml.torch.DistributedOptimizer(optimizer, model)

for epoch in range(args.epochs):
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(epoch + rank))
    steps = len(y) // args.batch_size
    if args.max_steps:
        steps = min(steps, args.max_steps)
    for step in range(steps):
        batch = order[step * args.batch_size:(step + 1) * args.batch_size]
        loss = F.cross_entropy(model(x[batch]), y[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if rank == 0:
        print(f"epoch {epoch + 1}: loss {loss.item():.4f} after {steps} steps on {size} ranks")

test_x = torch.from_numpy(idx(f"{args.data}/t10k-images-idx3-ubyte").astype(np.float32) / 255)
test_y = torch.from_numpy(idx(f"{args.data}/t10k-labels-idx1-ubyte").astype(np.int64))
with torch.no_grad():
    accuracy = (model(test_x).argmax(1) == test_y).double().mean().item()
if rank == 0:
    print(f"test accuracy {accuracy:.4f}")
