"""Horovod's published scaling set beside distml simulate's projection (docs/benchmarks.md,
"Simulator: projection"). Builds a distml profile of ResNet-101 and of VGG-16 from the
architectures themselves (PyTorch modules defined here, no weights): every parameter's bytes,
and each layer's share of the compute from its multiply-adds (forward hooks on one 224x224
image). The step's compute is the model's multiply-adds for the batch over an assumed GPU
rate (--gpu-tmacs: a Pascal P100's 4.65 T multiply-adds/s of FP32 at --utilisation), forward
one third and backward two. Then `distml simulate` predicts 1 to 128 servers of 4 GPUs on
Horovod's 25 Gbit/s network (a flat ring with 64 MiB fusion buffers, as Horovod's NCCL ring;
within a server 10 GB/s, a PCIe 3 x16 link).

Usage: sim_projection.py DISTML [--batch 64] [--gpu-tmacs 4.65] [--utilisation 0.5]
       [--latency 5us] [--out FILE]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
from torch import nn


def conv_bn(cin, cout, k, stride=1):
    return [nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout)]


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = 4 * width
        self.body = nn.Sequential(*conv_bn(cin, width, 1), nn.ReLU(),
                                  *conv_bn(width, width, 3, stride), nn.ReLU(),
                                  *conv_bn(width, cout, 1))
        self.down = (nn.Sequential(*conv_bn(cin, cout, 1, stride))
                     if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        return torch.relu(self.body(x) + self.down(x))


def resnet101():
    layers = [*conv_bn(3, 64, 7, 2), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for width, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 23, 2), (512, 3, 2)]:
        for b in range(blocks):
            layers.append(Bottleneck(cin, width, stride if b == 0 else 1))
            cin = 4 * width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000)]
    return nn.Sequential(*layers)


def vgg16():
    layers, cin = [], 3
    for v in [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
              512, 512, 512, "M"]:
        if v == "M":
            layers.append(nn.MaxPool2d(2))
        else:
            layers += [nn.Conv2d(cin, v, 3, padding=1), nn.ReLU()]
            cin = v
    layers += [nn.Flatten(), nn.Linear(512 * 7 * 7, 4096), nn.ReLU(), nn.Linear(4096, 4096),
               nn.ReLU(), nn.Linear(4096, 1000)]
    return nn.Sequential(*layers)


def macs_per_module(model):
    """{module name: multiply-adds for one 224x224 image} of every conv and linear layer."""
    macs = {}

    def hook(name):
        def record(module, inputs, output):
            if isinstance(module, nn.Conv2d):
                k = module.kernel_size[0] * module.kernel_size[1]
                macs[name] = output.numel() * k * module.in_channels // module.groups
            else:
                macs[name] = output.numel() * module.in_features
        return record

    for name, m in model.named_modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            m.register_forward_hook(hook(name))
    with torch.no_grad():
        model.eval()(torch.zeros(1, 3, 224, 224))
    return macs


def profile_of(name, model, batch, macs_per_s):
    """A distml profile (docs/simulator.md) of `model` on the assumed GPU."""
    macs = macs_per_module(model)
    total = sum(macs.values())
    forward_s = batch * total / macs_per_s
    backward_s = 2 * forward_s
    # A parameter's gradient is ready once backward has passed its layer: backward runs the
    # layers last to first, each in proportion to its multiply-adds (the BatchNorms, with
    # none, go with the conv before them).
    order = list(macs)
    after = {}
    done = 0
    for m in reversed(order):
        done += macs[m]
        after[m] = done / total * backward_s
    parameters, owner = [], order[0]
    for pname, p in model.named_parameters():
        module = pname.rsplit(".", 1)[0]
        if module in after:
            owner = module
        parameters.append({"name": pname, "bytes": 4 * p.numel(), "ready_s": after[owner]})
    count = sum(p.numel() for p in model.parameters())
    step = forward_s + backward_s
    return count, {
        "format": "distml-profile", "version": 1, "model": name, "dtype": "float32",
        "engine": "mpi", "batch_size": batch, "world": 1, "threads": 1, "cores": 1,
        "steps": 1, "data_s": 0, "forward_s": forward_s, "backward_s": backward_s,
        # SGD with momentum touches each parameter's 4 bytes 4 times, at a P100's 732 GB/s.
        "optimizer_s": 16 * count / 732e9, "other_s": 0, "step_s": step, "eval_s": 0,
        "parameters": parameters}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("distml")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--gpu-tmacs", type=float, default=4.65)
    ap.add_argument("--utilisation", type=float, default=0.5)
    ap.add_argument("--latency", default="5us", help="the network's one-way latency")
    ap.add_argument("--out", default="sim_projection.json")
    a = ap.parse_args()
    rate = a.gpu_tmacs * 1e12 * a.utilisation
    hosts = [1, 2, 4, 8, 16, 32, 64, 128]
    results = {}
    with tempfile.TemporaryDirectory() as d:
        for name, build, horovod in [("resnet101", resnet101, 0.90), ("vgg16", vgg16, 0.68)]:
            count, profile = profile_of(name, build(), a.batch, rate)
            path = os.path.join(d, f"{name}.json")
            with open(path, "w") as f:
                json.dump(profile, f)
            p = subprocess.run(
                [a.distml, "simulate", "--profile", path, "--hosts", ",".join(map(str, hosts)),
                 "--ranks-per-host", "4", "--bandwidth", "25gbit", "--latency", a.latency,
                 "--host-bandwidth", "80gbit", "--set", "strategy.algorithm=ring",
                 "--set", "strategy.bucket_mb=64", "--set", "strategy.first_bucket_mb=64",
                 "--json"], capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                sys.exit(p.stderr)
            lines = [json.loads(line) for line in p.stdout.splitlines()]
            curve = [(e["ranks"], e["efficiency"], e["step_s"]) for e in lines
                     if e["event"] == "prediction"]
            results[name] = {"parameters": count, "compute_s": profile["step_s"],
                             "horovod_512": horovod, "curve": curve}
            print(f"{name}: {count / 1e6:.1f} M parameters, {profile['step_s'] * 1e3:.0f} ms of "
                  f"compute per step of {a.batch}; Horovod at 512: {horovod:.0%}")
            for ranks, eff, step in curve:
                print(f"  {ranks:4d} ranks: step {step * 1e3:7.1f} ms, efficiency {eff:.1%}")
    with open(a.out, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
