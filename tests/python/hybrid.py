"""DistributedOptimizer's "hybrid" strategy against one process training on the whole batch.

The model has two sparse tables (an EmbeddingBag over a row's word ids and an Embedding of its
kind, sparse=True) and a dense output layer. Each rank takes an equal slice of a 12-row global
batch, so the ranks' mean-loss gradients average to the whole batch's, and plain SGD on the
touched rows is the dense SGD step: the replicas must follow torch.optim.SGD in one process.

The bound. In float64 the two differ only by the order of the sums: a table row's gradient
sums at most 12 rows' shares and the output layer's 12 rows x 6 inputs (~70 terms, each
rounding by 2^-53 ~ 1.1e-16 of a value of order 1), and without momentum an error is carried,
not amplified, through the 5 steps, each adding its own: 70 x 1.1e-16 x 5 ~ 4e-14; 1e-12
leaves room for the rows' values, of order lr x gradient ~ 1. Any protocol error (a row
averaged over the wrong count, a table stepped twice or not at all, the wrong learning rate)
moves a weight by the order of lr x gradient / ranks >= 1e-2.

Then: a resume after 2 steps from state_dict() is bit for bit one run, and what hybrid cannot
do exactly (momentum, a model without sparse embeddings, compression) is refused.
"""
import sys

import torch

import distml
import distml.torch

distml.init(timeout=60)
r, n = distml.rank(), distml.size()
torch.set_default_dtype(torch.float64)
STEPS, WORDS, KINDS = 5, 40, 5


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(7)
        self.words = torch.nn.EmbeddingBag(WORDS, 4, mode="mean", sparse=True, padding_idx=0)
        self.kind = torch.nn.Embedding(KINDS, 2, sparse=True)
        self.out = torch.nn.Linear(6, 3)

    def forward(self, ids, kind):
        return self.out(torch.cat([self.words(ids), self.kind(kind)], 1))


def batch(step):
    """12 rows of 5 word ids (0 pads; a batch touches at most 40 of the rows), a kind each."""
    g = torch.Generator().manual_seed(100 + step)
    return (torch.randint(0, WORDS, (12, 5), generator=g),
            torch.randint(0, KINDS, (12,), generator=g), torch.randint(0, 3, (12,), generator=g))


def train(net, optimizer, rows, steps):
    for step in steps:
        ids, kind, y = batch(step)
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(net(ids[rows], kind[rows]), y[rows]).backward()
        optimizer.step()


def flat(net):
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()])


failures = []
mine = slice(r * (12 // n), (r + 1) * (12 // n))
reference = Net()
train(reference, torch.optim.SGD(reference.parameters(), lr=0.5), slice(None), range(STEPS))
replica = Net()
opt = distml.torch.DistributedOptimizer(torch.optim.SGD(replica.parameters(), lr=0.5), replica,
                                        strategy="hybrid")
train(replica, opt, mine, range(STEPS))
worst = (flat(replica) - flat(reference)).abs().max().item()
moved = (flat(reference) - flat(Net())).abs().max().item()
if worst > 1e-12 or moved < 1e-3:
    failures.append(f"largest difference from the reference {worst:.3g} (bound 1e-12), the "
                    f"reference moved {moved:.3g}")

# Exact resume: 2 steps, state_dict, a fresh model and optimizer that load it, 3 more.
net = Net()
opt = distml.torch.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.5), net,
                                        strategy="hybrid")
train(net, opt, mine, range(2))
saved = {"model": net.state_dict(), "optimizer": opt.state_dict()}
net = Net()
opt = distml.torch.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.5), net,
                                        strategy="hybrid")
net.load_state_dict(saved["model"])
opt.load_state_dict(saved["optimizer"])
train(net, opt, mine, range(2, STEPS))
if not torch.equal(flat(net), flat(replica)):
    failures.append(f"a resume at step 2 differs from one run by "
                    f"{(flat(net) - flat(replica)).abs().max().item():.3g}")

# Refused at construction, naming what to change.
dense = torch.nn.Linear(3, 2)
for what, build, needle in [
        ("momentum", lambda: distml.torch.DistributedOptimizer(
            torch.optim.SGD(replica.parameters(), lr=0.5, momentum=0.9), replica,
            strategy="hybrid"), "momentum"),
        ("Adam", lambda: distml.torch.DistributedOptimizer(
            torch.optim.Adam(replica.parameters()), replica, strategy="hybrid"), "SGD"),
        ("no sparse embedding", lambda: distml.torch.DistributedOptimizer(
            torch.optim.SGD(dense.parameters(), lr=0.5), dense, strategy="hybrid"),
         "sparse=True"),
        ("compression", lambda: distml.torch.DistributedOptimizer(
            torch.optim.SGD(replica.parameters(), lr=0.5), replica, strategy="hybrid",
            compression="topk"), "compression")]:
    try:
        build()
        failures.append(f"{what}: accepted")
    except (distml.ConfigError, distml.UsageError) as e:
        if needle not in str(e):
            failures.append(f"{what}: the message does not name {needle!r}: {e}")

if failures:
    print(f"rank {r}: " + "; ".join(failures), file=sys.stderr)
    sys.exit(1)
print(f"rank {r} of {n}: hybrid follows one process ({worst:.3g}), resumes exactly, refuses "
      "what it cannot do")
