"""distml.torch.DistributedOptimizer against one process training on the whole batch.

Each rank takes an equal slice of a global batch, so the average of the ranks' mean-loss
gradients is the whole batch's mean-loss gradient, and the replicas must follow the single
process's trajectory. In float64 the two differ only by the order of the sums: each gradient
element sums at most 12 rows x 6 inputs (~100 terms, each rounding by 2^-53 ~ 1.1e-16 of a
value of order 1), momentum 0.9 carries an error into at most 1/(1-0.9) = 10 later steps,
and 5 steps add theirs: 100 x 1.1e-16 x 10 x 5 ~ 6e-13, so the bound is 1e-12. Tiny bucket
caps make several buckets, started from the gradient hooks in the planner's order.
"""
import sys

import torch

import distml
import distml.torch
from tiny_mlp import model, batch

distml.init(timeout=60)
r, n = distml.rank(), distml.size()
torch.set_default_dtype(torch.float64)


def train(net, optimizer, rows):
    for step in range(5):
        x, y = batch(step)
        loss = torch.nn.functional.mse_loss(net(x[rows]), y[rows])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


reference = model()
train(reference, torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9), slice(None))

replica = model()
optimizer = distml.torch.DistributedOptimizer(
    torch.optim.SGD(replica.parameters(), lr=0.1, momentum=0.9), replica,
    first_bucket_mb=100 / 2**20, bucket_mb=200 / 2**20)
share = 12 // n
train(replica, optimizer, slice(r * share, (r + 1) * share))

buckets = len(optimizer._buckets)
worst = max((a - b).abs().max().item()
            for a, b in zip(replica.state_dict().values(), reference.state_dict().values()))
moved = max((a - b).abs().max().item()
            for a, b in zip(reference.state_dict().values(), model().state_dict().values()))
if buckets < 3 or worst > 1e-12 or moved < 1e-3:
    print(f"rank {r}: {buckets} buckets, largest difference from the reference {worst:.3g} "
          f"(bound 1e-12), the reference moved {moved:.3g}", file=sys.stderr)
    sys.exit(1)
print(f"rank {r} of {n}: {buckets} buckets, largest difference {worst:.3g}: ok")
