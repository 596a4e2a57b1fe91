"""The PyTorch baseline for distml's training speed: DistributedDataParallel over gloo on CPU,
the same models, optimizer, batch per rank and thread count as `distml train`. Spawns --np
ranks itself and prints one JSON "done" line on stdout; errors go to stderr, exit status 1.
--impl distml trains the same script with distml's Python module instead of DDP
(distml.torch.DistributedOptimizer over the gloo engine; PYTHONPATH must reach build/python),
and --backend distml runs DDP over distml's c10d backend instead of gloo's."""
import argparse
import json
import os
import resource
import socket
import sys
import time
import traceback
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DistributedSampler

TRAIN_IMAGES = "train-images-idx3-ubyte"
TRAIN_LABELS = "train-labels-idx1-ubyte"


class LeNet5(nn.Module):
    """src/distml/nn/lenet5.cc for 1x28x28 inputs."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class Mlp(nn.Module):
    """src/distml/nn/mlp.cc with its default widths: ReLU after every linear but the last."""

    def __init__(self, layers=(784, 1024, 512, 10)):
        super().__init__()
        self.linears = nn.ModuleList(nn.Linear(a, b) for a, b in zip(layers, layers[1:]))

    def forward(self, x):
        x = x.flatten(1)
        for i, linear in enumerate(self.linears):
            x = linear(x)
            if i + 1 < len(self.linears):
                x = F.relu(x)
        return x


MODELS = {"lenet5": LeNet5, "mlp": Mlp}


def read_idx(path, rank):
    """An uncompressed u8 IDX file as a numpy array of its dims."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08 or data[3] != rank:
        raise ValueError(f"{path}: not an uncompressed u8 IDX file of rank {rank}")
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank)
    if body.size != int(np.prod(dims)):
        raise ValueError(f"{path}: {body.size} elements after the header, dims say {dims}")
    return body.reshape(dims)


def load_mnist(folder):
    """Training images as float [N, 1, 28, 28] in [0, 1] (as distml scales them) and labels."""
    images = read_idx(os.path.join(folder, TRAIN_IMAGES), 3)
    labels = read_idx(os.path.join(folder, TRAIN_LABELS), 1)
    if images.shape[0] != labels.shape[0]:
        raise ValueError(f"{folder}: {images.shape[0]} images but {labels.shape[0]} labels")
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    y = torch.from_numpy(labels.astype(np.int64))
    return x, y


def batches(sampler, batch_size):
    """This rank's index batches, epoch after epoch, without the incomplete last batch."""
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        order = torch.tensor(list(sampler), dtype=torch.int64)
        for start in range(0, len(order) - batch_size + 1, batch_size):
            yield order[start:start + batch_size]
        epoch += 1


class DistmlGroup:
    """What the loop needs of torch.distributed, from distml (--impl distml)."""

    def __init__(self, rank, args, port):
        import distml
        import distml.torch
        os.environ.update({"DISTML_ENGINE": "gloo", "RANK": str(rank),
                           "WORLD_SIZE": str(args.np), "MASTER_ADDR": "127.0.0.1",
                           "MASTER_PORT": str(port)})
        distml.init(timeout=300)
        self.distml = distml

    def wrap(self, model):
        self.distml.torch.broadcast_parameters(model)
        return model

    def optimizer(self, model, optimizer):
        return self.distml.torch.DistributedOptimizer(optimizer, model)

    def barrier(self):
        self.distml.barrier()

    def max(self, t):
        self.distml.allreduce(t, op="max")


class TorchGroup:
    """DDP over torch.distributed (--impl ddp), on gloo or distml's c10d backend (--backend)."""

    def __init__(self, rank, args, port):
        if args.backend == "distml":
            import distml.torch  # registers the backend
        dist.init_process_group(args.backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=args.np, timeout=timedelta(seconds=300))

    def wrap(self, model):
        return DistributedDataParallel(model)

    def optimizer(self, model, optimizer):
        return optimizer

    def barrier(self):
        dist.barrier()

    def max(self, t):
        dist.all_reduce(t, op=dist.ReduceOp.MAX)


def run_rank(rank, args, port, start_time):
    torch.set_num_threads(args.threads)
    group = (DistmlGroup if args.impl == "distml" else TorchGroup)(rank, args, port)
    torch.manual_seed(args.seed)
    x, y = load_mnist(args.data)
    # The whole training set is one pre-built tensor and a step gathers its batch with
    # index_select: DistributedSampler still decides the shard and order, but a DataLoader
    # (num_workers=0) would call __getitem__ and collate per sample, which costs DDP more
    # per step than the gather does and is not what we are measuring.
    sampler = DistributedSampler(range(len(y)), num_replicas=args.np, rank=rank, shuffle=True,
                                 seed=args.seed, drop_last=True)
    if len(sampler) < args.batch_size:
        raise ValueError(f"--batch-size {args.batch_size} is more than a rank's {len(sampler)} "
                         "samples per epoch")
    stream = batches(sampler, args.batch_size)
    model = group.wrap(MODELS[args.model]())
    optimizer = group.optimizer(model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9))

    def step():
        idx = next(stream)
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x.index_select(0, idx)), y.index_select(0, idx))
        loss.backward()
        optimizer.step()

    for _ in range(args.warmup):
        step()
    group.barrier()
    faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    # The slowest rank's time, and the most pages a rank faulted in per step (memory given
    # back to the system and taken again: docs/training.md, "Memory between steps").
    slowest = torch.tensor([time.perf_counter() - t0,
                            resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0],
                           dtype=torch.float64)
    group.max(slowest)
    if rank == 0:
        time_s = slowest[0].item()
        steps_per_sec = args.steps / time_s
        print(json.dumps({
            "event": "done", "impl": args.impl, "backend": args.backend, "model": args.model, "np": args.np,
            "batch_size": args.batch_size, "threads": args.threads, "steps": args.steps,
            "warmup": args.warmup, "steps_per_sec": steps_per_sec,
            "samples_per_sec": steps_per_sec * args.batch_size * args.np, "time_s": time_s,
            "wall_s": time.time() - start_time, "torch": torch.__version__,
            "page_faults_per_step": slowest[1].item() / args.steps,
        }), flush=True)
    group.barrier()  # no rank leaves while another still reads from it


def rank_main(rank, args, port, start_time):
    """One rank, ended with os._exit so that neither success nor failure tears torch down."""
    # torch 1.13 can deadlock in teardown: ~Reducer drops the last reference to the gloo
    # process group, whose destructor joins its worker threads while holding the GIL, and a
    # worker that is just releasing a finished Work frees a tensor with a Python object,
    # which needs the GIL. Seen here on a loaded machine (mlp, 2 ranks); exiting skips it.
    code = 0
    try:
        run_rank(rank, args, port, start_time)
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", choices=sorted(MODELS), default="lenet5")
    p.add_argument("--impl", choices=["ddp", "distml"], default="ddp",
                   help="DDP over torch.distributed, or distml's DistributedOptimizer")
    p.add_argument("--backend", choices=["gloo", "distml"], default="gloo",
                   help="torch.distributed's backend under --impl ddp")
    p.add_argument("--np", type=int, default=2, help="world size (ranks spawned here)")
    p.add_argument("--batch-size", type=int, default=64, help="per rank")
    p.add_argument("--steps", type=int, default=300, help="timed optimizer steps")
    p.add_argument("--warmup", type=int, default=20, help="untimed steps before the timed ones")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per rank")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", default="data/mnist", help="folder with the raw MNIST IDX files")
    args = p.parse_args()
    for name in ("np", "batch_size", "steps", "threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.warmup < 0:
        p.error("--warmup must be >= 0")
    return args


def main():
    start_time = time.time()
    args = parse_args()
    for name in (TRAIN_IMAGES, TRAIN_LABELS):
        path = os.path.join(args.data, name)
        if not os.path.isfile(path):
            print(f"ddp_train: missing data file {path}", file=sys.stderr)
            return 1
    try:
        mp.spawn(rank_main, args=(args, free_port(), start_time), nprocs=args.np)
    except Exception as e:  # a rank failed (the others are killed); its traceback is above
        print(f"ddp_train: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
