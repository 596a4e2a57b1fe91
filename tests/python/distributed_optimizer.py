"""distml.torch.DistributedOptimizer against one process training on the whole batch.

Each rank takes an equal slice of a global batch, so the average of the ranks' mean-loss
gradients is the whole batch's mean-loss gradient, and the replicas must follow the single
process's trajectory. In float64 the two differ only by the order of the sums: each gradient
element sums at most 12 rows x 6 inputs (~100 terms, each rounding by 2^-53 ~ 1.1e-16 of a
value of order 1), momentum 0.9 carries an error into at most 1/(1-0.9) = 10 later steps,
and 5 steps add theirs: 100 x 1.1e-16 x 10 x 5 ~ 6e-13, so the bound is 1e-12. Tiny bucket
caps make several buckets, started from the gradient hooks in the planner's order.

Then the same against PyTorch's DDP over torch's own gloo, in the same processes on the same
slices: DistributedOptimizer follows DDP's trajectory. Each rank's gradient is the same kernels
on the same rows on both sides; only the all-reduce's order of summing the n <= 3 ranks' values
may differ (at most 2 roundings of 1.1e-16 per element per step), carried by momentum into 10
steps, over 5 steps: ~1e-14, so the same bound 1e-12 holds with room, while a bucket not
averaged moves a weight by ~1e-2.
"""
import os
import sys
import tempfile

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

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
mine = slice(r * (12 // n), (r + 1) * (12 // n))
train(replica, optimizer, mine)

buckets = len(optimizer._buckets)
worst = max((a - b).abs().max().item()
            for a, b in zip(replica.state_dict().values(), reference.state_dict().values()))
moved = max((a - b).abs().max().item()
            for a, b in zip(reference.state_dict().values(), model().state_dict().values()))

# DDP meets through a file that rank 0 names (the launcher's store port is distml's).
path = np.zeros(256, np.uint8)
if r == 0:
    name = tempfile.mktemp(prefix="distml-ddp-").encode()
    path[:len(name)] = np.frombuffer(name, np.uint8)
distml.broadcast(path, 0)
path = path.tobytes().rstrip(b"\0").decode()
dist.init_process_group("gloo", init_method=f"file://{path}", rank=r, world_size=n)
ddp_net = model()
train(DistributedDataParallel(ddp_net),
      torch.optim.SGD(ddp_net.parameters(), lr=0.1, momentum=0.9), mine)
dist.destroy_process_group()
distml.barrier()
if r == 0 and os.path.exists(path):
    os.remove(path)
from_ddp = max((a - b).abs().max().item()
               for a, b in zip(replica.state_dict().values(), ddp_net.state_dict().values()))
if buckets < 3 or worst > 1e-12 or moved < 1e-3 or from_ddp > 1e-12:
    print(f"rank {r}: {buckets} buckets, largest difference from the reference {worst:.3g} "
          f"(bound 1e-12), from DDP {from_ddp:.3g}, the reference moved {moved:.3g}",
          file=sys.stderr)
    sys.exit(1)
print(f"rank {r} of {n}: {buckets} buckets, largest difference {worst:.3g}, from DDP "
      f"{from_ddp:.3g}: ok")
