"""A PyTorch DDP script whose only change is the backend's name: "distml" instead of "gloo".

    distml launch -n 2 --engine gloo -- /usr/bin/python3 examples/python/ddp_backend.py

torch.distributed's env:// rendezvous reads what distml launch sets (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT); torchrun works as well. The all-reduces DDP starts from its
gradient hooks run on distml's algorithms (on one host, through shared memory).
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

import distml.torch  # registers the backend "distml"

parser = argparse.ArgumentParser()
parser.add_argument("--backend", default="distml", choices=["distml", "gloo"])
parser.add_argument("--steps", type=int, default=200)
args = parser.parse_args()

dist.init_process_group(args.backend)
rank = dist.get_rank()
torch.manual_seed(0)  # the same model everywhere (DDP also broadcasts rank 0's at the start)
model = DistributedDataParallel(torch.nn.Sequential(
    torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
teacher = torch.randn(32, 4, generator=torch.Generator().manual_seed(1))
data = torch.Generator().manual_seed(100 + rank)  # each rank its own samples
for step in range(args.steps):
    x = torch.randn(64, 32, generator=data)
    loss = F.cross_entropy(model(x), (x @ teacher).argmax(1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
loss = loss.detach()
dist.all_reduce(loss, op=dist.ReduceOp.AVG)
if rank == 0:
    print(f"{dist.get_backend()}: mean loss over {dist.get_world_size()} ranks after "
          f"{args.steps} steps: {loss.item():.4f}")
dist.destroy_process_group()
