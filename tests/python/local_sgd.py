"""DistributedOptimizer with strategy local_sgd, post_local_sgd, easgd and gossip against one
process that simulates every rank's replica (and easgd's centre), and the exact resume of every
strategy, with and without compression, from state_dict().

Rank r trains on its own batches. The reference keeps n replicas in one process: during
post_local_sgd's warm-up each replica steps on the mean of all replicas' gradients; after it,
each steps on its own and every `period` local steps the replicas' parameters (and momentum,
with average_optimizer_state) are replaced by their mean, or, for easgd, pulled towards the
centre, which moves towards their mean; gossip mixes each replica's parameters from before its
update with its ring neighbours' (weights 1/3, or 1/2 at 2 ranks) and adds its update.
Float64; bound 1e-12: each average sums 3 values of order 1 (2 roundings of 1.1e-16),
momentum 0.9 carries an error over at most 10 steps, 9 steps: 2 x 1.1e-16 x 10 x 9 ~ 2e-14.
"""
import sys

import torch

import distml
import distml.torch
from tiny_mlp import model

distml.init(timeout=60)
r, n = distml.rank(), distml.size()
torch.set_default_dtype(torch.float64)
STEPS = 9
CASES = [("local_sgd", dict(period=3)),
         ("local_sgd", dict(period=2, average_optimizer_state=True)),
         ("post_local_sgd", dict(period=2, warmup_steps=3)),
         ("easgd", dict(period=2, alpha=0.2)),
         ("gossip", {})]


def sgd(net):
    return torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)


def batch(step, rank):
    g = torch.Generator().manual_seed(1000 * rank + step)
    return torch.randn(4, 6, generator=g), torch.randn(4, 3, generator=g)


def loss_of(net, step, rank):
    x, y = batch(step, rank)
    return torch.nn.functional.mse_loss(net(x), y)


def reference(strategy, options):
    nets = [model() for _ in range(n)]
    centre = [p.detach().clone() for p in nets[0].parameters()]
    opts = [sgd(net) for net in nets]
    warmup, period = options.get("warmup_steps", 0), options.get("period", 1)
    for step in range(STEPS):
        for q, (net, opt) in enumerate(zip(nets, opts)):
            opt.zero_grad()
            loss_of(net, step, q).backward()
        if step < warmup:
            with torch.no_grad():
                for ps in zip(*(net.parameters() for net in nets)):
                    mean = sum(p.grad for p in ps) / n
                    for p in ps:
                        p.grad.copy_(mean)
        before = [[p.detach().clone() for p in net.parameters()] for net in nets]
        for opt in opts:
            opt.step()
        local = step + 1 - warmup
        if strategy == "gossip":
            offsets = [1] if n == 2 else [1, n - 1]  # the ring's neighbours
            w = 1 / (1 + len(offsets))
            with torch.no_grad():
                for q, net in enumerate(nets):
                    for k, p in enumerate(net.parameters()):
                        mixed = w * (before[q][k] + sum(before[(q - d) % n][k] for d in offsets))
                        p.add_(mixed - before[q][k])
        elif local > 0 and local % period == 0 and strategy == "easgd":
            alpha = options["alpha"]
            with torch.no_grad():
                for c, ps in zip(centre, zip(*(net.parameters() for net in nets))):
                    mean = sum(ps) / n
                    pulls = [alpha * (p - c) for p in ps]
                    c.add_(alpha * n * (mean - c))
                    for p, pull in zip(ps, pulls):
                        p.sub_(pull)
        elif local > 0 and local % period == 0:
            with torch.no_grad():
                groups = [list(zip(*(net.parameters() for net in nets)))]
                if options.get("average_optimizer_state"):
                    groups.append([tuple(o.state[p]["momentum_buffer"] for o, p in zip(opts, ps))
                                   for ps in zip(*(net.parameters() for net in nets))])
                for group in groups:
                    for ts in group:
                        mean = sum(ts) / n
                        for t in ts:
                            t.copy_(mean)
    return nets[r]


failures = []
for strategy, options in CASES:
    net = model()
    opt = distml.torch.DistributedOptimizer(sgd(net), net, strategy=strategy, **options)
    for step in range(STEPS):
        opt.zero_grad()
        loss_of(net, step, r).backward()
        opt.step()
    want = reference(strategy, options)
    worst = max((a - b).abs().max().item() for a, b in zip(net.parameters(), want.parameters()))
    if worst > 1e-12:
        failures.append(f"{strategy} {options}: {worst:.3g} from the reference (bound 1e-12)")
    apart = max((a - b).abs().max().item() for a, b in zip(want.parameters(), model().parameters()))
    if apart < 1e-3:
        failures.append(f"{strategy} {options}: the model did not train")
# Exact resume: 4 steps, state_dict, a fresh model and optimizer that load it, 5 more steps:
# bit for bit the 9 steps of one run (the next average falls where it would have).
TOPK = {"name": "topk", "ratio": 0.25}
for strategy, options in CASES + [
        ("allreduce", {}), ("zero", dict(stage=2)), ("allreduce", dict(compression=TOPK)),
        ("local_sgd", dict(period=3, compression={"name": "randomk", "ratio": 0.5})),
        ("post_local_sgd", dict(period=2, warmup_steps=3,
                                compression=dict(TOPK, warmup_steps=1)))]:
    runs = []
    for stop in (None, 4):
        net = model()
        opt = distml.torch.DistributedOptimizer(sgd(net), net, strategy=strategy, **options)
        for step in range(STEPS):
            if step == stop:
                saved = {"model": net.state_dict(), "optimizer": opt.state_dict()}
                net = model()
                opt = distml.torch.DistributedOptimizer(sgd(net), net, strategy=strategy,
                                                        **options)
                net.load_state_dict(saved["model"])
                opt.load_state_dict(saved["optimizer"])
            opt.zero_grad()
            loss_of(net, step, r).backward()
            opt.step()
        runs.append(torch.cat([p.detach().reshape(-1) for p in net.parameters()]))
    if not torch.equal(runs[0], runs[1]):
        failures.append(f"{strategy} {options}: a resume at step 4 differs from one run by "
                        f"{(runs[0] - runs[1]).abs().max().item():.3g}")
if failures:
    print(f"rank {r}: " + "; ".join(failures), file=sys.stderr)
    sys.exit(1)
print(f"rank {r}: local_sgd, post_local_sgd, easgd and gossip follow the simulated replicas; "
      "every strategy resumes exactly")
