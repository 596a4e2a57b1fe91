"""`distml train --set train.precision=bf16` against PyTorch's own mixed precision: the same
scripted model, rows and SGD, the Python side running each rank's forward under
torch.autocast("cpu", dtype=torch.bfloat16), the loss on the float32 logits, and averaging
the ranks' float32 gradients itself.

usage: bf16_against_torch.py DISTML   (PYTHONPATH holding the built `distml` module, whose
ShardedSampler gives each rank's rows as the trainer takes them)

The bound. Both sides run the same LibTorch kernels on the same shapes (each rank's 8 rows
through a scripted 6-32-32-3 MLP), so their bfloat16 products agree; they differ in float32
rounding of the average and of SGD's update (2^-24 ~ 6e-8 of a value, a few per step), which
over 6 steps with momentum 0.9 (a rounding carried into up to 10 later steps) is ~1e-5 of the
distance the weights travel. A float32 difference can rarely move a later bfloat16 cast to
the neighbouring value (2^-8 of one weight, one term of 32 in a product): well under 1e-3 of
the travel, the bound. Training in float32 instead lands ~1e-2 or more away (printed).
"""
import os
import subprocess
import sys
import tempfile

import torch

from distml import _distml

ROWS, BATCH, STEPS, SEED, LR, MOMENTUM = 96, 8, 6, 3, 0.2, 0.9
BOUND = 1e-3  # see the docstring


def write_inputs(folder):
    g = torch.Generator().manual_seed(7)
    x = torch.randn(ROWS, 6, generator=g)
    y = (x[:, 0] + x[:, 1] > 0).long() + (x[:, 2] > 1).long()
    with open(f"{folder}/rows.csv", "w") as f:
        f.write(",".join(f"f{i}" for i in range(6)) + ",label\n")
        for row, label in zip(x.tolist(), y.tolist()):
            f.write(",".join(repr(v) for v in row) + f",{label}\n")
    torch.manual_seed(5)
    net = torch.nn.Sequential(torch.nn.Linear(6, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32),
                              torch.nn.ReLU(), torch.nn.Linear(32, 3))
    torch.jit.script(net).save(f"{folder}/model.pt")
    with open(f"{folder}/run.toml", "w") as f:
        f.write(f"""[data]
dataset = "csv"
path = "{folder}/rows.csv"
test_path = "{folder}/rows.csv"
[model]
name = "torchscript"
path = "{folder}/model.pt"
[optim]
name = "sgd"
lr = {LR}
momentum = {MOMENTUM}
[train]
batch_size = {BATCH}
max_steps = {STEPS}
seed = {SEED}
log_every = 100
precision = "bf16"
""")


def load_rows(path):
    """The CSV as the trainer reads it: float32 features."""
    rows = [line.strip().split(",") for line in open(path).readlines()[1:]]
    x = torch.tensor([[float(v) for v in r[:-1]] for r in rows], dtype=torch.float32)
    return x, torch.tensor([int(r[-1]) for r in rows])


def reference(folder, world, bf16):
    """The run in one process: each rank's gradient on its rows, their average, SGD."""
    x, y = load_rows(f"{folder}/rows.csv")
    net = torch.jit.load(f"{folder}/model.pt")
    opt = torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM)
    samplers = [_distml.ShardedSampler(ROWS, world, r, BATCH, SEED, True) for r in range(world)]
    for step in range(STEPS):
        total = None
        for sampler in samplers:
            epoch, at = divmod(step, sampler.steps_per_epoch())  # 3 ranks cross an epoch
            rows = torch.tensor(sampler.indices(epoch, at), dtype=torch.long)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                out = net(x[rows])
            loss = torch.nn.functional.cross_entropy(out.float(), y[rows])
            grads = torch.autograd.grad(loss, list(net.parameters()))
            total = grads if total is None else [a + b for a, b in zip(total, grads)]
        for p, g in zip(net.parameters(), total):
            p.grad = g / world
        opt.step()
    return {k: v.detach() for k, v in net.state_dict().items()}


def main(distml_bin):
    failed = False
    with tempfile.TemporaryDirectory() as folder:
        write_inputs(folder)
        start = torch.jit.load(f"{folder}/model.pt").state_dict()
        for world in (1, 2, 3):
            subprocess.run([distml_bin, "train", "--config", f"{folder}/run.toml", "--np",
                            str(world), "--engine", "local", "--set",
                            f"train.export={folder}/cpp_{world}.pt"], check=True,
                           stdout=subprocess.DEVNULL)
            cpp = torch.load(f"{folder}/cpp_{world}.pt")
            apart = {}
            for bf16 in (True, False):
                ref = reference(folder, world, bf16)
                apart[bf16] = max(((cpp[k] - ref[k]).norm() / (ref[k] - start[k]).norm()).item()
                                  for k in ref)
            ok = apart[True] <= BOUND and all(v.dtype == torch.float32 for v in cpp.values())
            failed = failed or not ok
            print(f"np{world}: from torch.autocast's run {apart[True]:.3g} (bound {BOUND:g}), "
                  f"from float32's {apart[False]:.3g}: {'ok' if ok else 'FAILED'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main(sys.argv[1])
