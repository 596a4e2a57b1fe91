"""DistributedOptimizer.join() with uneven batch counts, and broadcast_optimizer_state.

Rank r has COUNTS[r % 3] batches (5, 2, 4): without join() the rank with fewer batches would
leave the others waiting in their all-reduce. Inside `with opt.join()` each step averages over
the ranks still training, and at the end every rank takes the state of one that trained the
most steps. The reference is one process that, at step s, averages the mean-loss gradients of
the batches of the ranks with more than s batches. Float64, bound 1e-12 as in
distributed_optimizer.py: each element sums at most 3 ranks x 4 rows of order-1 values (~12
roundings of 1.1e-16), momentum 0.9 carries an error into 10 later steps, 5 steps:
12 x 1.1e-16 x 10 x 5 ~ 7e-14.
"""
import sys

import torch

import distml
import distml.torch
from tiny_mlp import model

distml.init(timeout=60)
r, n = distml.rank(), distml.size()
torch.set_default_dtype(torch.float64)
COUNTS = [5, 2, 4]
failures = []


def batch(step, rank):
    g = torch.Generator().manual_seed(1000 * rank + step)
    return torch.randn(4, 6, generator=g), torch.randn(4, 3, generator=g)


def sgd(net):
    return torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)


reference = model()
reference_opt = sgd(reference)
for step in range(max(COUNTS[q % 3] for q in range(n))):
    training = [q for q in range(n) if step < COUNTS[q % 3]]
    loss = sum(torch.nn.functional.mse_loss(reference(x), y)
               for x, y in (batch(step, q) for q in training)) / len(training)
    reference_opt.zero_grad()
    loss.backward()
    reference_opt.step()

replica = model()
opt = distml.torch.DistributedOptimizer(sgd(replica), replica, first_bucket_mb=100 / 2**20,
                                        bucket_mb=200 / 2**20)
with opt.join():
    for step in range(COUNTS[r % 3]):
        x, y = batch(step, r)
        opt.zero_grad()
        torch.nn.functional.mse_loss(replica(x), y).backward()
        opt.step()

worst = max((a - b).abs().max().item()
            for a, b in zip(replica.state_dict().values(), reference.state_dict().values()))
momentum = [reference_opt.state[p]["momentum_buffer"] for p in reference.parameters()]
ours = [opt.optimizer.state[p]["momentum_buffer"] for p in replica.parameters()]
worst_momentum = max((a - b).abs().max().item() for a, b in zip(ours, momentum))
if worst > 1e-12 or worst_momentum > 1e-12:
    failures.append(f"after join, parameters differ from the reference by {worst:.3g} and "
                    f"momentum by {worst_momentum:.3g} (bound 1e-12)")

# broadcast_optimizer_state: only rank 0 has stepped (a local optimizer); afterwards every
# rank holds its momentum and learning rate.
local = model()
local_opt = sgd(local)
if r == 0:
    torch.nn.functional.mse_loss(local(batch(0, 0)[0]), batch(0, 0)[1]).backward()
    local_opt.param_groups[0]["lr"] = 0.05
    local_opt.step()
distml.torch.broadcast_optimizer_state(local_opt, root=0)
if local_opt.param_groups[0]["lr"] != 0.05 or len(local_opt.state) != len(list(local.parameters())):
    failures.append(f"broadcast_optimizer_state: lr {local_opt.param_groups[0]['lr']}, "
                    f"{len(local_opt.state)} parameters with state")
else:
    mine = torch.cat([local_opt.state[p]["momentum_buffer"].reshape(-1)
                      for p in local.parameters()])
    root = mine.clone()
    distml.broadcast(root, 0)
    if not torch.equal(mine, root):
        failures.append("broadcast_optimizer_state: momentum differs from rank 0's")

if failures:
    print(f"rank {r}: " + "; ".join(failures), file=sys.stderr)
    sys.exit(1)
print(f"rank {r}: {COUNTS[r % 3]} batches joined without deadlock; state equals the reference")
