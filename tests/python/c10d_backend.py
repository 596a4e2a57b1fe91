"""The c10d backend "distml": torch.distributed's collectives against their closed forms, and
PyTorch's own DDP and ZeroRedundancyOptimizer over distml against one process training on
every rank's rows, and (gloo engine) against the same over gloo in the same process (the
default group is distml's, a second group gloo's).

The trainings differ only by the order of float64 sums: a gradient element sums at most 12
rows (3 ranks x 4) of values of order 1 (~12 roundings of 2^-53 ~ 1.1e-16), momentum 0.9
carries an error into at most 1/(1-0.9) = 10 later steps, and 5 steps add theirs:
12 x 1.1e-16 x 10 x 5 ~ 7e-14, so the bound 1e-12 leaves a margin while a missed or doubled
bucket moves a parameter by ~1e-2.
"""
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

import distml.torch  # registers the backend

dist.init_process_group("distml", timeout=timedelta(seconds=60))
r, n = dist.get_rank(), dist.get_world_size()
assert dist.get_backend() == "distml", dist.get_backend()
failures = []


def expect(what, got, want):
    if not torch.equal(got, want):
        failures.append(f"{what}: {got.tolist()} instead of {want.tolist()}")


# Collectives: rank i contributes values of i + 1, whose sums and extremes are known.
ranks = torch.arange(1.0, n + 1)
t = torch.full((5,), r + 1.0)
dist.all_reduce(t)
expect("all_reduce sum", t, torch.full((5,), ranks.sum().item()))
t = torch.full((3,), r + 1.0)
dist.all_reduce(t, op=dist.ReduceOp.MAX)
expect("all_reduce max", t, torch.full((3,), float(n)))
t = torch.full((3,), r + 1, dtype=torch.int64)
work = dist.all_reduce(t, async_op=True)
work.wait()
expect("async all_reduce int64", t, torch.full((3,), int(ranks.sum().item())))
t = torch.arange(4.0) if r == 0 else torch.zeros(4)
dist.broadcast(t, 0)
expect("broadcast", t, torch.arange(4.0))
parts = [torch.zeros(2) for _ in range(n)]
dist.all_gather(parts, torch.full((2,), float(r)))
expect("all_gather", torch.stack(parts), torch.arange(float(n)).repeat_interleave(2).view(n, 2))
out = torch.zeros(n * 2)
dist.all_gather_into_tensor(out, torch.full((2,), float(r)))
expect("all_gather_into_tensor", out, torch.arange(float(n)).repeat_interleave(2))
out = torch.zeros(2)
dist.reduce_scatter(out, [torch.full((2,), (r + 1.0) * (j + 1)) for j in range(n)])
expect("reduce_scatter", out, torch.full((2,), ranks.sum().item() * (r + 1)))
out = torch.zeros(n)
dist.all_to_all_single(out, torch.arange(float(n)) + 10 * r)
expect("all_to_all_single", out, torch.arange(float(n)) * 10 + r)
got = torch.zeros(3)
dist.scatter(got, [torch.full((3,), float(j)) for j in range(n)] if r == 0 else None, src=0)
expect("scatter", got, torch.full((3,), float(r)))
gathered = [torch.zeros(1) for _ in range(n)] if r == 0 else None
dist.gather(torch.full((1,), float(r)), gathered, dst=0)
if r == 0:
    expect("gather", torch.cat(gathered), torch.arange(float(n)))
# A ring of point-to-point transfers, receives posted first.
got = torch.zeros(2)
receive = dist.irecv(got, (r - 1) % n)
dist.isend(torch.full((2,), float(r)), (r + 1) % n).wait()
receive.wait()
expect("isend/irecv ring", got, torch.full((2,), float((r - 1) % n)))
dist.barrier()

# DDP and ZeroRedundancyOptimizer over distml against one process on every rank's rows, and,
# on the gloo engine, against the same over gloo.
torch.set_default_dtype(torch.float64)
over_gloo = os.environ.get("DISTML_ENGINE") != "mpi"
gloo = dist.new_group(backend="gloo") if over_gloo else None


def batch(step, rank):
    g = torch.Generator().manual_seed(100 + 10 * step + rank)  # each rank its own rows
    return torch.randn(4, 6, generator=g), torch.randn(4, 3, generator=g)


def train(group, zero, replicated=True, hook=None):
    torch.manual_seed(7)
    net = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    # Tiny buckets: several all-reduces, started from DDP's hooks during the backward.
    model = DDP(net, process_group=group, bucket_cap_mb=100 / 2**20) if replicated else net
    if hook == "fp16":
        model.register_comm_hook(group, default_hooks.fp16_compress_hook)
    elif hook == "powersgd":  # rank 1 from step 2: the 5 x 6 and 3 x 5 weights compress
        model.register_comm_hook(powerSGD_hook.PowerSGDState(
            process_group=group, matrix_approximation_rank=1, start_powerSGD_iter=2,
            min_compression_rate=1), powerSGD_hook.powerSGD_hook)
    if zero:
        opt = ZeroRedundancyOptimizer(model.parameters(), torch.optim.SGD, process_group=group,
                                      lr=0.1, momentum=0.9)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(5):
        # The mean loss over all ranks' equal batches is the mean of the ranks' mean losses.
        rows = [batch(step, r)] if replicated else [batch(step, q) for q in range(n)]
        x, y = torch.cat([a for a, _ in rows]), torch.cat([b for _, b in rows])
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()])


def compare(what, ours, reference):
    worst = (ours - reference).abs().max().item()
    if worst > 1e-12:
        failures.append(f"{what} differs by {worst:.3g} (bound 1e-12)")


one_process = train(None, False, replicated=False)
for zero in (False, True):
    name = "ZeroRedundancyOptimizer" if zero else "DDP"
    ours = train(None, zero)
    compare(f"{name} over distml from one process", ours, one_process)
    if over_gloo:
        compare(f"{name} over distml from {name} over gloo", ours, train(gloo, zero))
# DDP's compression hooks (their all-reduces on float16 and on PowerSGD's factors) against the
# same hooks over gloo: at 2 ranks a sum of two has one rounding whatever the algorithm, so
# the bound above holds. The compressed runs must also differ from the uncompressed one by far
# more than float64 rounding (1e-12): float16 keeps 11 bits, so each gradient element moves by
# up to 2^-11 of itself (~5e-4 x ~0.1), and 5 steps of lr 0.1 carry ~1e-5 into the weights;
# PowerSGD's rank-1 approximation changes them by the order of the update. 1e-6 separates both.
if over_gloo:
    for hook in ("fp16", "powersgd"):
        ours = train(None, False, hook=hook)
        compare(f"DDP with the {hook} hook over distml from the same over gloo", ours,
                train(gloo, False, hook=hook))
        if (ours - one_process).abs().max().item() < 1e-6:
            failures.append(f"the {hook} hook changed nothing: was it called?")

dist.destroy_process_group()
if failures:
    print(f"rank {r}: " + "; ".join(failures), file=sys.stderr)
else:
    print(f"rank {r}: collectives, DDP and ZeroRedundancyOptimizer over distml agree")
if over_gloo:
    # torch 1.13's ProcessGroupGloo can abort the interpreter's exit: a worker thread freeing a
    # tensor that has a Python object takes the GIL while Python finalizes (pthread_exit in
    # PyEval_AcquireThread, 1 run in 12). Leave without finalizing (under mpirun that would
    # skip MPI_Finalize, and there is no gloo group there).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1 if failures else 0)
sys.exit(1 if failures else 0)
