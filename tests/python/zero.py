"""DistributedOptimizer(strategy="zero") against one process training on the whole batch.

Each rank takes an equal slice of a global batch, so ZeRO (synchronous: the averaged gradient,
the optimizer state sharded) must follow the single process's trajectory, for SGD with
momentum and for Adam (per-element state, which a shard must keep for its elements only),
stages 1 and 2, with tiny buckets (several buckets, each padded to equal blocks). Float64;
bound 1e-12 as in distributed_optimizer.py (~100 terms of 1.1e-16, momentum's 10 steps, 5
steps: ~6e-13; Adam divides by sqrt(v) + eps, which at these gradients of order 0.1 scales an
error by at most ~10 while its step is bounded by lr).
"""
import sys

import torch

import distml
import distml.torch
from tiny_mlp import model, batch

distml.init(timeout=60)
r, n = distml.rank(), distml.size()
torch.set_default_dtype(torch.float64)


OPTIMIZERS = {"sgd": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
              "adam": lambda ps: torch.optim.Adam(ps, lr=0.01)}


def train(net, optimizer, rows):
    for step in range(5):
        x, y = batch(step)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(net(x[rows]), y[rows]).backward()
        optimizer.step()


failures = []
share = 12 // n
for name, make in OPTIMIZERS.items():
    reference = model()
    train(reference, make(reference.parameters()), slice(None))
    for stage in (1, 2):
        replica = model()
        optimizer = distml.torch.DistributedOptimizer(
            make(replica.parameters()), replica, strategy="zero", stage=stage,
            first_bucket_mb=100 / 2**20, bucket_mb=200 / 2**20)
        train(replica, optimizer, slice(r * share, (r + 1) * share))
        worst = max((a - b).abs().max().item()
                     for a, b in zip(replica.parameters(), reference.parameters()))
        shard = optimizer._zero.shard.numel()
        total = sum(p.numel() for p in replica.parameters())
        if worst > 1e-12:
            failures.append(f"{name} stage {stage}: {worst:.3g} from the reference (bound 1e-12)")
        if len(optimizer.optimizer.state) or shard > -(-total // n) + len(optimizer._buckets):
            failures.append(f"{name} stage {stage}: the state is not sharded (a shard of {shard} "
                            f"of {total} elements, wrapped optimizer's state "
                            f"{len(optimizer.optimizer.state)})")
if failures:
    print(f"rank {r}: " + "; ".join(failures), file=sys.stderr)
    sys.exit(1)
print(f"rank {r}: zero stages 1 and 2 follow one process (SGD, Adam)")
