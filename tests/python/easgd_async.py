"""DistributedOptimizer's asynchronous EASGD (asynchronous=True) against one process that
simulates it, on ranks 0 and 1 (a worker and the centre rank; the others wait): with one
worker the order of the exchanges is the worker's, so the run is deterministic.

The simulation: the worker takes 9 SGD steps (momentum 0.9) on its batches and after every
3rd moves by d = alpha (x - c) towards the centre c, which moves by +d; reconcile() then makes
the model the centre. In float64 the two compute the same operations in the same order, up to
the order of libtorch's sums inside a step: ~100 terms of order 1 rounding by 2^-53 ~ 1.1e-16,
carried into at most 1/(1-0.9) = 10 later steps by momentum, 9 steps: ~1e-12 at most, so the
bound is 1e-12. A missed exchange, the centre not moved, or the worker not pulled back moves a
weight by alpha x (x - c) ~ 1e-3 or more.

Then: a resume after 4 steps from state_dict() (which reconciles, as a C++ checkpoint does)
is bit for bit a run that called state_dict() at the same step and went on; and what cannot
run is refused (one rank, alpha above 1, asynchronous with another strategy).
"""
import sys

import torch

import distml
import distml.torch
from tiny_mlp import model, batch

distml.init(timeout=60)
r = distml.rank()
torch.set_default_dtype(torch.float64)
PERIOD, ALPHA, STEPS = 3, 0.3, 9
pair = distml.split(0 if r < 2 else -1, r)


def sgd(net):
    return torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)


def local_step(net, optimizer, step):
    x, y = batch(step)
    optimizer.zero_grad()
    torch.nn.functional.mse_loss(net(x), y).backward()
    optimizer.step()


def simulated():
    net, centre = model(), [p.detach().clone() for p in model().parameters()]
    optimizer = sgd(net)
    for step in range(STEPS):
        local_step(net, optimizer, step)
        if (step + 1) % PERIOD == 0:
            with torch.no_grad():
                for p, c in zip(net.parameters(), centre):
                    d = ALPHA * (p - c)
                    c.add_(d)
                    p.sub_(d)
    return torch.cat([c.reshape(-1) for c in centre])


def run(stop=None):
    """The worker's parameters after STEPS steps and reconcile(); with `stop`, state_dict()
    at that step, then (stop >= 0) a fresh model and optimizer that load it, the centre rank
    serving again, resumed."""
    net = model()
    opt = distml.torch.DistributedOptimizer(sgd(net), net, strategy="easgd", period=PERIOD,
                                            alpha=ALPHA, asynchronous=True, group=pair)
    if not opt.trains:
        opt.serve()
        if stop is not None and stop >= 0:
            opt = distml.torch.DistributedOptimizer(sgd(net), net, strategy="easgd",
                                                    period=PERIOD, alpha=ALPHA,
                                                    asynchronous=True, group=pair)
            opt.serve(resumed=True)
        return None
    for step in range(STEPS):
        if stop is not None and step == abs(stop):
            saved = {"model": net.state_dict(), "optimizer": opt.state_dict()}
            if stop >= 0:
                opt.finish()
                net = model()
                opt = distml.torch.DistributedOptimizer(sgd(net), net, strategy="easgd",
                                                        period=PERIOD, alpha=ALPHA,
                                                        asynchronous=True, group=pair)
                net.load_state_dict(saved["model"])
                opt.load_state_dict(saved["optimizer"])
        local_step(net, opt, step)
    opt.reconcile()
    opt.finish()
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()])


failures = []
if pair is not None:
    ours = run()
    if ours is not None:
        want = simulated()
        worst = (ours - want).abs().max().item()
        start = torch.cat([p.detach().reshape(-1) for p in model().parameters()])
        moved = (want - start).abs().max().item()
        if worst > 1e-12 or moved < 1e-3:
            failures.append(f"{worst:.3g} from the simulation (bound 1e-12), the centre moved "
                            f"{moved:.3g}")
    straight, resumed = run(stop=-4), run(stop=4)
    if straight is not None and not torch.equal(straight, resumed):
        failures.append(f"a resume at step 4 differs from one run by "
                        f"{(straight - resumed).abs().max().item():.3g}")
    for what, options, needle in [
            ("alpha above 1", dict(strategy="easgd", alpha=1.5), "alpha"),
            ("asynchronous ps", dict(strategy="ps"), "easgd")]:
        try:
            net = model()
            distml.torch.DistributedOptimizer(sgd(net), net, asynchronous=True, group=pair,
                                              **options)
            failures.append(f"{what}: accepted")
        except (distml.ConfigError, distml.UsageError) as e:
            if needle not in str(e):
                failures.append(f"{what}: the message does not name {needle!r}: {e}")
alone = distml.split(r, 0)  # every rank on its own: no centre rank to spare
try:
    net = model()
    distml.torch.DistributedOptimizer(sgd(net), net, strategy="easgd", asynchronous=True,
                                      group=alone)
    failures.append("one rank: accepted")
except distml.ConfigError as e:
    if "2 ranks" not in str(e):
        failures.append(f"one rank: the message does not say it needs 2 ranks: {e}")
if failures:
    print(f"rank {r}: " + "; ".join(failures), file=sys.stderr)
    sys.exit(1)
print(f"rank {r}: asynchronous EASGD follows the simulation"
      f"{f' ({worst:.3g})' if pair is not None and r == 0 else ''}, resumes exactly, refuses "
      "what it cannot run")
