"""Each collective of `import distml` on NumPy arrays and torch tensors against a NumPy
reference computed on every rank from every rank's inputs (the inputs are a function of the
rank). The values are small integers and halves, whose float sums are exact in any order, so
the results must equal the reference exactly. Run under the launcher:
    distml launch -n N --engine E -- python3 tests/python/collectives.py
"""
import sys

import numpy as np
import torch

import distml

world = distml.init(timeout=60)
r, n = distml.rank(), distml.size()
failures = []


def check(what, got, want):
    got = got.numpy() if isinstance(got, torch.Tensor) else got
    if got.shape != want.shape or not np.array_equal(got, want):
        failures.append(f"{what}: got {got.ravel()[:6]}..., want {want.ravel()[:6]}...")


def values(q, count=1000):
    """Rank q's input: small integers and halves."""
    return ((np.arange(count) * (q + 3)) % 17 - 8) / 2.0


everyone = np.stack([values(q) for q in range(n)])

for op, reduce in [("sum", np.sum), ("max", np.max), ("min", np.min), ("avg", np.mean)]:
    x = values(r).copy()
    distml.allreduce(x, op=op)
    check(f"allreduce {op} float64", x, reduce(everyone, axis=0))
for algorithm in ["ring", "tree", "hd"]:
    x = values(r).copy()
    distml.allreduce(x, algorithm=algorithm)
    check(f"allreduce {algorithm}", x, everyone.sum(axis=0))

for dtype in [torch.float32, torch.bfloat16, torch.int64]:
    t = torch.tensor(values(r) * (2 if dtype == torch.int64 else 1)).to(dtype)
    h = distml.allreduce(t, async_op=True)
    h.wait()
    if not h.test():
        failures.append("a finished handle's test() is False")
    want = everyone.sum(axis=0) * (2 if dtype == torch.int64 else 1)
    check(f"allreduce torch {dtype}", t.to(torch.float64), want)

x = values(r).copy()
distml.broadcast(x, root=n - 1)
check("broadcast", x, values(n - 1))

check("allgather", distml.allgather(values(r)), everyone)
t = torch.tensor(values(r), dtype=torch.float32)
out, h = distml.allgather(t, async_op=True)
h.wait()
check("allgather torch async", out.to(torch.float64), everyone)

rows = np.arange(n * 6, dtype=np.float64).reshape(n * 3, 2) * (r + 1)
total = np.arange(n * 6, dtype=np.float64).reshape(n * 3, 2) * sum(q + 1 for q in range(n))
check("reduce_scatter", distml.reduce_scatter(rows), total[3 * r:3 * r + 3])

blocks = np.array([[100 * r + q] * 2 for q in range(n)], dtype=np.int32)  # block q goes to q
check("alltoall", distml.alltoall(blocks),
      np.array([[100 * q + r] * 2 for q in range(n)], dtype=np.int32))

# Sub-groups: even and odd ranks.
half = distml.split(r % 2, r)
x = values(r).copy()
distml.allreduce(x, group=half)
check("allreduce in a split", x, everyone[r % 2::2].sum(axis=0))

# broadcast_parameters: every replica ends with rank n-1's initial model (built here too).
import distml.torch  # noqa: E402


def model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2))


mine = model(r)
mine[1].running_mean += r  # a buffer that differs too
distml.torch.broadcast_parameters(mine, root=n - 1)
theirs = model(n - 1)
theirs[1].running_mean += n - 1
for (name, got), want in zip(mine.state_dict().items(), theirs.state_dict().values()):
    check(f"broadcast_parameters {name}", got.to(torch.float64), want.to(torch.float64).numpy())

if distml.local_rank() != r:  # every rank on this host
    failures.append(f"local_rank {distml.local_rank()} on rank {r}, all on one host")

# A wrong call is a typed error naming what is wrong, on this rank only.
try:
    distml.allreduce(np.zeros((4, 4))[:, 0])
    failures.append("a strided array was accepted")
except distml.UsageError as e:
    if "not contiguous" not in str(e) or not isinstance(e, ValueError):
        failures.append(f"the wrong error for a strided array: {e!r}")

distml.barrier()
if failures:
    print(f"rank {r}: " + "\n".join(failures), file=sys.stderr)
    sys.exit(1)
print(f"rank {r} of {n} over {world.engine}: ok")
