"""DistributedOptimizer with strategy ps (bsp, the last rank a server, the others workers)
against one process training on the workers' whole batch, and its exact resume from
state_dict(): 4 steps, a checkpoint, a fresh optimizer (and server) that load it, 5 more steps,
bit for bit the 9 steps of one run; and the same resume with top-k compression, whose
error-feedback residuals are the workers' state.

Each worker takes an equal slice of a 12-row batch; the server averages the workers' mean-loss
gradients, which is the whole batch's, and steps SGD with momentum: the single process's
trajectory in float64 up to the order of the sums, bound 1e-12 as in distributed_optimizer.py
(12 rows x 6 inputs ~ 100 roundings of 1.1e-16, momentum carrying each over 10 steps, 9 steps:
~1e-12 at most; measured ~1e-17). Tiny bucket caps make several buckets, so several pushes
and pulls a step.
"""
import sys

import torch

import distml
import distml.torch
from tiny_mlp import model, batch

distml.init(timeout=60)
r, n = distml.rank(), distml.size()
torch.set_default_dtype(torch.float64)
STEPS, workers = 9, n - 1


def optimizer(compression):
    net = model()
    sgd = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    return net, distml.torch.DistributedOptimizer(sgd, net, strategy="ps", servers=1,
                                                  first_bucket_mb=100 / 2**20,
                                                  bucket_mb=200 / 2**20, compression=compression)


def run(stop=None, compression=None):
    """The workers' parameters after STEPS steps, restarted from a state_dict() after `stop`
    steps; None on the server."""
    net, opt = optimizer(compression)
    if not opt.trains:
        opt.serve()
        if stop is not None:  # the restarted run: the workers hand over the checkpoint
            net, opt = optimizer(compression)
            opt.serve(resumed=True)
        return None
    rows = slice(r * 12 // workers, (r + 1) * 12 // workers)
    for step in range(STEPS):
        if step == stop:
            saved = {"model": net.state_dict(), "optimizer": opt.state_dict()}
            opt.finish()
            net, opt = optimizer(compression)
            net.load_state_dict(saved["model"])
            opt.load_state_dict(saved["optimizer"])
        x, y = batch(step)
        loss = torch.nn.functional.mse_loss(net(x[rows]), y[rows])
        opt.zero_grad()
        loss.backward()
        opt.step()
    opt.reconcile()
    opt.finish()
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()])


straight, resumed = run(), run(stop=4)
topk = {"name": "topk", "ratio": 0.25}
compressed, compressed_resumed = run(compression=topk), run(stop=4, compression=topk)
if straight is not None:
    reference = model()
    sgd = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    for step in range(STEPS):
        x, y = batch(step)
        sgd.zero_grad()
        torch.nn.functional.mse_loss(reference(x), y).backward()
        sgd.step()
    want = torch.cat([p.detach().reshape(-1) for p in reference.parameters()])
    start = torch.cat([p.detach().reshape(-1) for p in model().parameters()])
    worst = (straight - want).abs().max().item()
    failures = []
    # 1e-3: the model must have moved (9 steps of lr 0.1 move it by ~1e-1).
    if worst > 1e-12 or (want - start).abs().max().item() < 1e-3:
        failures.append(f"ps differs from one process by {worst:.3g} (bound 1e-12), or the "
                        "model did not train")
    for what, one, two in (("", straight, resumed), (" with topk", compressed,
                                                       compressed_resumed)):
        if not torch.equal(one, two):
            failures.append(f"a resume at step 4{what} differs from one run by "
                            f"{(one - two).abs().max().item():.3g}")
    # Top-k at 0.25 holds back three quarters of each push (error feedback delays them), a
    # change of the order of lr x gradient ~1e-2, far above float64 rounding (1e-12).
    if (compressed - straight).abs().max().item() < 1e-6:
        failures.append("topk changed nothing: were the pushes compressed?")
    if failures:
        print(f"rank {r}: " + "; ".join(failures), file=sys.stderr)
        sys.exit(1)
    print(f"rank {r} of {n} (a worker of {workers}): ps follows one process ({worst:.3g}) and "
          "resumes exactly, with and without topk")
