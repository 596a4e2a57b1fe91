"""distml for PyTorch scripts: what a training loop needs beyond the collectives.

    import distml, distml.torch
    distml.init()
    model = Net()
    distml.torch.broadcast_parameters(model, root=0)   # every replica starts from rank 0's

Importing this module also registers the c10d backend "distml", so that a torch.distributed
script (DDP, ZeroRedundancyOptimizer, the collectives) runs on distml's engine:

    import distml.torch
    torch.distributed.init_process_group("distml")
"""
import io
import os

import numpy as np
import torch
import torch.distributed

import distml
from distml import _c10d
from distml._compression import Compression
from distml._easgd import ElasticCentre
from distml._flat import flatten, unflatten_into
from distml._hybrid import RowTables
from distml._ps import ParameterServer
from distml._zero import ZeroShard

# Gossip's messages: tag + the offset's index, as the C++ strategy numbers them.
_GOSSIP_TAG = 0x6055

# Under mpirun (distml launch's mpi engine), torch.distributed's env:// rendezvous finds its
# rank and world in mpirun's variables.
for _ours, _mpiruns in (("RANK", "OMPI_COMM_WORLD_RANK"), ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"),
                        ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK")):
    if _ours not in os.environ and _mpiruns in os.environ:
        os.environ[_ours] = os.environ[_mpiruns]

if "DISTML" not in torch.distributed.Backend._plugins:
    torch.distributed.Backend.register_backend("distml", _c10d.create)


def _tensors(source):
    """The tensors of a module (parameters and buffers), a state_dict, or an iterable of
    tensors or (name, tensor) pairs."""
    if isinstance(source, torch.nn.Module):
        return list(source.state_dict().values())
    if isinstance(source, dict):
        return list(source.values())
    return [t[1] if isinstance(t, tuple) else t for t in source]


def broadcast_parameters(source, root=0, group=None):
    """Overwrites, in place, every tensor of `source` (a module's parameters and buffers, a
    state_dict, or tensors) with root's. Every rank of the group must call it with tensors of
    the same shapes in the same order."""
    with torch.no_grad():
        for t in _tensors(source):
            if not torch.is_tensor(t):
                continue  # state_dict entries that are not tensors (none in torch.nn's modules)
            if t.is_contiguous():
                distml.broadcast(t, root, group=group)
            else:
                staged = t.contiguous()
                distml.broadcast(staged, root, group=group)
                t.copy_(staged)


def broadcast_optimizer_state(optimizer, root=0, group=None):
    """Overwrites, on every rank, the optimizer's state and hyper-parameters (its state_dict:
    momentum buffers, step counts, learning rates) with root's, so that a job resumed on root
    from a checkpoint continues alike everywhere. Works before the first step too, when the
    other ranks have no state yet. `optimizer` may be a DistributedOptimizer."""
    inner = optimizer.optimizer if isinstance(optimizer, DistributedOptimizer) else optimizer
    comm = distml._comm(group)
    payload = b""
    if comm.rank == root:
        buffer = io.BytesIO()
        torch.save(inner.state_dict(), buffer)
        payload = buffer.getvalue()
    size = np.array([len(payload)], dtype=np.int64)
    distml.broadcast(size, root, group=group)
    data = np.frombuffer(payload, dtype=np.uint8).copy() if comm.rank == root else \
        np.empty(int(size[0]), dtype=np.uint8)
    distml.broadcast(data, root, group=group)
    if comm.rank != root:
        inner.load_state_dict(torch.load(io.BytesIO(data.tobytes())))


class DistributedOptimizer:
    """Wraps a torch optimizer so that step() applies the gradient averaged over the ranks,
    as the C++ trainer's "allreduce" strategy does: the parameters are grouped into buckets by
    the trainer's own planner (in reverse order, about the order backward produces them, the
    first capped at first_bucket_mb so that communication starts early), and each bucket's
    all-reduce starts from a gradient hook during backward as soon as its gradients are in and
    the buckets before it have started (every rank starts them in the same order). step()
    waits for them (each .grad is a view of its bucket, so it then holds the average) and
    steps the wrapped optimizer.

        opt = distml.torch.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model)
        loss.backward(); opt.step(); opt.zero_grad()

    The other strategies follow the C++ strategies' protocols: "zero" (stage=1 or 2) shards the
    optimizer state (and in stage 2 the averaged gradient) over the ranks, ZeRO's way
    (distml/_zero.py; its state_dict is each rank's own shard); "local_sgd" (Lin et al. 2020)
    steps on the rank's own gradients and averages the parameters every `period` steps (and the
    optimizer state with average_optimizer_state); "post_local_sgd" is "allreduce" for the
    first `warmup_steps` steps, then "local_sgd" with its first average `period` steps after
    the warm-up; "easgd" pulls the replicas towards a centre variable every `period` steps by
    `alpha` (with asynchronous=True the C++ asynchronous EASGD instead: the last rank holds the
    centre and serves, each worker exchanges with it every `period` steps on its own schedule;
    distml/_easgd.py); "gossip" (D-PSGD) mixes each rank's parameters with its neighbours' in
    `topology` (ring, exponential, complete) every step, the exchange starting with backward;
    "ps" is the C++ parameter server (`servers`, `mode`, `staleness`; distml/_ps.py): the last
    `servers` ranks serve (trains False: they call serve()), the workers push gradients and
    pull parameters, and call finish() at the end. "hybrid" (Parallax; distml/_hybrid.py)
    serves the rows of the model's sparse embeddings (Embedding / EmbeddingBag with sparse=True)
    on their owner ranks, with plain SGD, and averages the other parameters as "allreduce".
    `compression` (a compressor's name, or a dict of docs/training.md's compress.* keys: name,
    ratio, levels, rank, error_feedback, warmup_steps, seed) runs the C++ trainer's compressors
    under allreduce, local_sgd, post_local_sgd and ps (distml/_compression.py). One backward per
    step (gradient accumulation is not offered yet).

    Ranks with different numbers of batches train inside `with opt.join():` (join())."""

    STRATEGIES = ("allreduce", "zero", "local_sgd", "post_local_sgd", "easgd", "gossip", "ps",
                  "hybrid")

    def __init__(self, optimizer, model, strategy="allreduce", bucket_mb=25.0, first_bucket_mb=1.0,
                 group=None, period=8, warmup_steps=0, average_optimizer_state=False, alpha=0.1,
                 stage=1, topology="ring", compression=None, servers=1, mode="bsp",
                 staleness=3, asynchronous=False):
        if strategy not in self.STRATEGIES:
            raise distml.UsageError(f'strategy "{strategy}" is not one of '
                                    f'{", ".join(self.STRATEGIES)}')
        if strategy != "allreduce" and period < 1:
            raise distml.UsageError(f"period must be at least 1 step, not {period}")
        if strategy == "post_local_sgd" and warmup_steps < 0:
            raise distml.UsageError(f"warmup_steps must be >= 0, not {warmup_steps}")
        ranks = distml._comm(group).size
        if asynchronous and strategy != "easgd":
            raise distml.UsageError(f'asynchronous=True is easgd\'s, not "{strategy}"\'s')
        if strategy == "easgd" and asynchronous and not 0 < alpha <= 1:
            raise distml.UsageError(f"asynchronous easgd needs 0 < alpha <= 1, not {alpha}")
        if strategy == "easgd" and not asynchronous and not 0 < alpha * ranks <= 1:
            raise distml.UsageError(f"easgd needs 0 < alpha x ranks <= 1 (alpha {alpha}, "
                                    f"{ranks} ranks): beyond, the centre overshoots the mean")
        self.strategy = strategy
        self._period = period
        # Steps of synchronous all-reduce before local SGD (the C++ strategies' protocol).
        self._warmup = {"allreduce": float("inf"), "zero": float("inf"), "ps": float("inf"),
                        "hybrid": float("inf"), "post_local_sgd": warmup_steps}.get(strategy, 0)
        self._alpha = alpha
        self._centre = None  # easgd's centre variable, a copy on every rank
        self._average_state = average_optimizer_state
        self._steps = 0
        self._apart = set()  # what differs between replicas: "params", "state" (local steps)
        self.optimizer = optimizer
        self._model = model
        self._group = group
        self._offsets = distml._distml.gossip_offsets(topology, ranks) \
            if strategy == "gossip" else []
        self._exchange = None  # gossip's transfers in flight: (sent, received, handles)
        self._joining = False  # inside join(): sums and a count of the ranks still training
        # hybrid's tables are served by rows; the buckets hold the rest.
        self._tables = RowTables(optimizer, model, group) if strategy == "hybrid" else None
        self._params = [p for p in model.parameters()
                        if p.requires_grad and not (self._tables and self._tables.holds(p))]
        sizes = [p.numel() * p.element_size() for p in self._params]
        self._buckets = distml._distml.plan_buckets(sizes, int(first_bucket_mb * 2**20),
                                                    int(bucket_mb * 2**20))
        self._bucket_of = {}
        self._flat = []  # one buffer per bucket for the whole run: no allocation per step
        for b, members in enumerate(self._buckets):
            dtypes = {self._params[i].dtype for i in members}
            if len(dtypes) > 1:
                raise distml.UsageError(f"bucket {b} mixes parameters of "
                                        f"{sorted(map(str, dtypes))}: give the model one dtype")
            for i in members:
                self._bucket_of[i] = b
            elements = sum(self._params[i].numel() for i in members)
            if strategy == "zero":  # padded to equal blocks, one a rank
                elements = -(-elements // ranks) * ranks
            self._flat.append(torch.zeros(elements, dtype=dtypes.pop()))
        # Each .grad is a view of its bucket's buffer (DDP's gradient_as_bucket_view): backward
        # accumulates into it in place, and the all-reduce reads and writes it there, with no
        # copy either way and no gradient allocated per step (a fresh 5 MB gradient per step
        # doubled the MLP's backward).
        self._views = [None] * len(self._params)
        for b, members in enumerate(self._buckets):
            offset = 0
            for i in members:
                p = self._params[i]
                self._views[i] = self._flat[b][offset:offset + p.numel()].view_as(p)
                offset += p.numel()
        self._attach_views()
        self._zero = ZeroShard(self, stage) if strategy == "zero" else None
        self._compression = None if compression in (None, "none") else \
            Compression(self, compression)
        self._ps = ParameterServer(self, servers, mode, staleness, int(first_bucket_mb * 2**20),
                                   int(bucket_mb * 2**20)) if strategy == "ps" else None
        self._elastic = ElasticCentre(self, alpha) if asynchronous else None
        self._server = self._ps or self._elastic  # the ranks that serve instead of training
        self._accumulators = []
        for i, p in enumerate(self._params):
            # The AccumulateGrad node's hook runs once p.grad holds this backward's gradient.
            accumulate = p.expand_as(p).grad_fn.next_functions[0][0]
            self._accumulators.append(accumulate)  # keep the node, or its hook goes with it
            accumulate.register_hook(self._ready_hook(i))
        self._reset()

    def _reset(self):
        self._missing = [len(m) for m in self._buckets]
        self._launched = 0
        self._inflight = []  # (flat buffer, handle) per launched bucket

    def _syncing(self):
        """Whether this step's gradients are averaged (else the step is local SGD's)."""
        return self._steps < self._warmup

    def _ready_hook(self, i):
        def hook(*_):
            if not self._syncing():
                if self._offsets and self._exchange is None:
                    self._start_exchange()  # the first gradient: the parameters are this step's
                return
            b = self._bucket_of[i]
            self._missing[b] -= 1
            if self._compressing():
                return  # reduced after backward, bucket by bucket
            while self._launched < len(self._buckets) and self._missing[self._launched] == 0:
                self._launch(self._launched)
                self._launched += 1
        return hook

    def _attach_views(self):
        with torch.no_grad():
            for p, view in zip(self._params, self._views):
                if p.grad is not None and p.grad.data_ptr() != view.data_ptr():
                    view.copy_(p.grad)
                p.grad = view

    def _compressing(self):
        return self._compression is not None and \
            self._compression.compresses_gradients(self._steps)

    def _gather_grads(self, b):
        """Bucket b's gradients into its buffer, where one was set to None or replaced."""
        for i in self._buckets[b]:
            p, view = self._params[i], self._views[i]
            if p.grad.data_ptr() != view.data_ptr():
                view.copy_(p.grad)
                p.grad = view

    def _launch(self, b):
        flat = self._flat[b]
        self._gather_grads(b)
        if self._ps is not None:
            self._ps.push(b, flat)
            return
        if self._zero is not None and self._zero.stage == 2:  # straight into the shard
            _, handle = distml.reduce_scatter(flat, out=self._zero.grad_block(b), op="avg",
                                              group=self._group, async_op=True)
        else:
            handle = distml.allreduce(flat, op="sum" if self._joining else "avg",
                                      group=self._group, async_op=True)
        self._inflight.append((flat, handle))

    def _check_complete(self):
        complete = sum(missing == 0 for missing in self._missing)
        if complete < len(self._buckets):
            raise distml.UsageError(
                f"step() after a backward that produced gradients for {complete} of "
                f"{len(self._buckets)} buckets: every trained parameter needs a gradient "
                "each step (or leave it out of the model's trained parameters)")

    def synchronize(self):
        """Waits for every bucket: .grad then holds the averages."""
        self._check_complete()
        if self._compressing():
            comm = distml._comm(self._group)
            for b, flat in enumerate(self._flat):
                self._gather_grads(b)
                self._compression.reduce_bucket(flat, b, self._steps + 1, comm)
        training = None
        if self._joining:
            training = self._count_training(1)
            self._joined_steps += 1
        for b, (flat, handle) in enumerate(self._inflight):
            handle.wait()
            if training is not None:
                flat /= training  # the average over the ranks still training
        self._reset()

    def _count_training(self, mine):
        """After this step's buckets: how many ranks still train (each passes 1 or 0)."""
        count = np.array([float(mine)])
        distml.allreduce(count, group=self._group)
        return count[0]

    def join(self):
        """A context for ranks with different numbers of batches (no deadlock):

            with opt.join():
                for x, y in my_batches:          # as many as this rank has
                    ...; loss.backward(); opt.step()

        Inside, each step also counts the ranks still training, and the gradients are averaged
        over them. A rank that leaves the loop takes part in the others' all-reduces with
        zeros until every rank has left; then all ranks take the parameters and optimizer
        state of a rank that trained the most steps, so that the replicas agree again."""
        return _Join(self)

    def step(self, closure=None):
        if not self.trains:
            raise distml.UsageError("step() on a serving rank (trains False): it calls serve()")
        if self._ps is not None:  # the servers step; the fresh parameters come back
            if closure is not None:
                raise distml.UsageError("ps: the servers apply the update; step() takes no "
                                        "closure")
            self._check_complete()
            self._ps.step(self.optimizer.param_groups[0]["lr"], self._params)
            self._steps += 1
            self._reset()
            return None
        if self._syncing():
            self.synchronize()
        if self._tables is not None:
            self._tables.step()
        if self.strategy == "easgd" and self._centre is None and self._elastic is None:
            # synchronous EASGD's centre: the parameters at the start, before any step
            self._centre = [p.detach().clone() for p in self._params]
        if self._zero is not None:
            if closure is not None:
                raise distml.UsageError("zero steps its shard: step() takes no closure")
            self._zero.step()
            self._steps += 1
            return None
        if self._offsets and self._exchange is None:  # a step without gradient hooks
            self._start_exchange()
        if self._compression is not None and self._steps >= self._warmup:
            self._compression.before_local_steps(self._params)
        result = self.optimizer.step(closure)
        self._steps += 1
        local = self._steps - self._warmup
        if local > 0:
            self._apart = {"params", "state"}
        if self.strategy == "gossip":
            self._mix()
        elif local > 0 and local % self._period == 0:
            if self._elastic is not None:
                self._elastic.exchange(self._params)
            elif self.strategy == "easgd":
                self._elastic_update()
            else:
                self.average_parameters()
        return result

    def _start_exchange(self):
        """Gossip's exchange (the C++ protocol, train/strategies/gossip_strategy.h): a flat copy
        of this rank's parameters to every out-neighbour r + d, a receive from every
        in-neighbour r - d; it runs while backward and the update go on."""
        comm = distml._comm(self._group)
        n, r = comm.size, comm.rank
        sent = flatten(self._params)
        received, handles = [], []
        for k, d in enumerate(self._offsets):
            received.append(torch.empty_like(sent))
            handles.append(distml.recv(received[-1], (r - d) % n, _GOSSIP_TAG + k,
                                       group=self._group, async_op=True))
            handles.append(distml.send(sent, (r + d) % n, _GOSSIP_TAG + k, group=self._group,
                                       async_op=True))
        self._exchange = (sent, received, handles)

    def _mix(self):
        """x_i <- w x_i + sum_d w x_(i-d) + this step's update, w = 1 / (1 + neighbours)."""
        if self._exchange is None:  # one rank
            return
        sent, received, handles = self._exchange
        for handle in handles:
            handle.wait()
        self._exchange = None
        w = 1.0 / (1 + len(self._offsets))
        x = flatten(self._params)
        x.sub_(sent).add_(sent, alpha=w)
        for y in received:
            x.add_(y, alpha=w)
        unflatten_into(x, self._params)

    def _elastic_update(self):
        """EASGD (synchronous, Zhang et al. 2015), from the old values of both:
        x_i <- x_i - alpha (x_i - centre),  centre <- centre + alpha N (mean of the x_i - centre).
        The mean has the same bits everywhere, so the centre's copies stay equal."""
        n = distml._comm(self._group).size
        with torch.no_grad():
            for p, centre in zip(self._params, self._centre):
                mean = p.detach().clone()
                distml.allreduce(mean, op="avg", group=self._group)
                pull = self._alpha * (p - centre)
                centre.add_(self._alpha * n * (mean - centre))
                p.sub_(pull)

    def average_parameters(self):
        """Local SGD's average: every rank's parameters (and, with average_optimizer_state,
        its optimizer's state tensors) replaced by their mean over the ranks. Collective."""
        if self._compression is not None:
            self._compression.average_parameters(self, self._steps - self._warmup,
                                                 distml._comm(self._group))
        else:
            self._average(self._params)
        if self._average_state:
            self._average(self._state_tensors())
        self._apart -= {"params", "state"} if self._average_state else {"params"}

    def _state_tensors(self):
        """The optimizer's per-parameter state tensors (momentum, Adam's moments; not the
        step counts), as the C++ strategies average them."""
        return [t for p in self._params for t in self.optimizer.state.get(p, {}).values()
                if torch.is_tensor(t) and t.is_floating_point() and t.dim() > 0]

    def _average(self, tensors, over=None):
        """Each tensor replaced by its average over `over` (default: the optimizer's group)."""
        with torch.no_grad():
            for t in tensors:
                distml.allreduce(t.data, op="avg", group=self._group if over is None else over)

    @property
    def trains(self):
        """False on a rank that serves instead of training (calls serve()): a parameter server
        ("ps"), asynchronous EASGD's centre."""
        return self._server is None or self._server.trains

    @property
    def workers(self):
        """The ranks that train, as a group: shard the data over it (ShardedSampler's group)."""
        return self._server.workers if self._server is not None else distml._comm(self._group)

    def serve(self, resumed=False):
        """A serving rank's part (trains False): serves until every worker has called
        finish(); for ps returns the servers' report (updates, staleness histogram).
        `resumed`: the workers resume from a state_dict() (load_state_dict()): worker 0 sends
        this rank the parameters (and a server its optimizer state) first."""
        if self._server is None or self._server.trains:
            raise distml.UsageError("serve() is a serving rank's (a parameter server, "
                                    "asynchronous EASGD's centre: trains False)")
        return self._server.serve(self._params, resumed)

    def finish(self):
        """A worker's end of a "ps" or asynchronous "easgd" run (after its last reconcile()):
        the serving ranks stop; ps's report comes back (updates, staleness histogram). Nothing
        for other strategies."""
        return self._server.finish() if self._server is not None else None

    def reconcile(self):
        """Collective: every replica becomes the one model the run stands for, as the C++
        trainer's strategies make it before evaluating, saving or exporting: for local_sgd,
        post_local_sgd and gossip the replicas' average, of the parameters and the optimizer
        state (what drifted since the last average); for
        easgd the centre (asynchronous: the centre rank's, once every worker has asked), with
        the optimizer state averaged. Nothing where the replicas never
        differ (allreduce, zero, a warm-up). For ps, the servers' current parameters once
        every worker has asked. Call it before evaluating or saving the model."""
        if self._ps is not None:
            self._ps.sync(self._params)
            return
        if self._elastic is not None:
            self._elastic.sync(self._params)
            self._average(self._state_tensors(), over=self._elastic.workers)
            self._apart = set()
            return
        if self.strategy == "easgd" and self._apart:
            with torch.no_grad():
                for p, centre in zip(self._params, self._centre):
                    p.copy_(centre)
            self._average(self._state_tensors())
        else:
            self._average((self._params if "params" in self._apart else []) +
                          (self._state_tensors() if "state" in self._apart else []))
            if "params" in self._apart and self._compression is not None:
                self._compression.averaged_exactly(self._params)
        self._apart = set()

    def zero_grad(self, set_to_none=False):
        """Zeroes the gradients in place, whatever `set_to_none` says: they are views of the
        buckets' buffers, which stay allocated for the whole run."""
        for flat in self._flat:
            flat.zero_()
        self._attach_views()

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    def state_dict(self):
        """The wrapped optimizer's state_dict plus the strategy's own state under "distml"
        (its name, the steps taken, which place local SGD's next average, whether the replicas
        differ, EASGD's centre, ZeRO's shard, the compressor's state, and for ps the servers'
        optimizer states), for an exact resume with load_state_dict. With ps, collective over
        the workers; asynchronous EASGD first reconciles (the model becomes the centre, as a
        C++ checkpoint saves it), collective over the workers and the centre rank."""
        if self._elastic is not None:
            self.reconcile()
        state = self.optimizer.state_dict()
        state["distml"] = {"strategy": self.strategy, "steps": self._steps,
                           "apart": sorted(self._apart),
                           "centre": [c.clone() for c in self._centre or []] or None,
                           "zero": self._zero.state_dict() if self._zero else None,
                           "compression": self._compression.state_dict()
                           if self._compression else None,
                           "servers": self._ps.save(self._params) if self._ps else None,
                           "asynchronous": self._elastic is not None}
        return state

    def load_state_dict(self, state):
        state = dict(state)
        ours = state.pop("distml", None)
        if ours is None:
            raise distml.UsageError("this state_dict has no \"distml\" entry: it is not a "
                                    "DistributedOptimizer's (load a plain optimizer's into "
                                    ".optimizer)")
        if ours["strategy"] != self.strategy:
            raise distml.UsageError(f'the state was saved with strategy "{ours["strategy"]}", '
                                    f'this optimizer runs "{self.strategy}"')
        if ours.get("asynchronous", False) != (self._elastic is not None):
            raise distml.UsageError("the state was saved with another asynchronous= than this "
                                    "optimizer's")
        if self._compression is not None and not ours.get("compression"):
            raise distml.UsageError("the state was saved without compression, and this "
                                    "optimizer compresses")
        self.optimizer.load_state_dict(state)
        self._steps = ours["steps"]
        self._apart = set(ours.get("apart", []))
        self._centre = [c.clone() for c in ours["centre"]] if ours.get("centre") else None
        if self._zero is not None:
            self._zero.load_state_dict(ours["zero"])
        if self._compression is not None:
            self._compression.load_state_dict(ours["compression"])
        if self._ps is not None:  # the servers, in serve(resumed=True), get theirs
            self._ps.resume(ours["servers"], self._params)
        if self._elastic is not None:  # the centre, in serve(resumed=True), gets the model
            self._elastic.resume(self._params)


class _Join:
    def __init__(self, optimizer):
        self._opt = optimizer

    def __enter__(self):
        if self._opt._launched:
            raise distml.UsageError("join() between a backward and its step()")
        if self._opt.strategy != "allreduce":
            raise distml.UsageError(f'join() is offered with the "allreduce" strategy, not '
                                    f'"{self._opt.strategy}"')
        if self._opt._compression is not None:
            raise distml.UsageError("join() does not take compression: the compressors "
                                    "average over every rank, join() over those still training")
        self._opt._joining = True
        self._opt._joined_steps = 0
        return self._opt

    def __exit__(self, kind, error, trace):
        opt = self._opt
        try:
            if kind is not None:
                return False  # the others time out naming this rank, as for any failure
            # Shadow the others' steps: the same buckets, in the same order, holding zeros
            # (again each round: the all-reduce leaves the others' sum in them).
            while True:
                for flat in opt._flat:
                    flat.zero_()
                handles = [distml.allreduce(flat, op="sum", group=opt._group, async_op=True)
                           for flat in opt._flat]
                for handle in handles:
                    handle.wait()
                if opt._count_training(0) == 0:
                    break
            # A rank that trained the most steps (the lowest such) becomes everyone's state.
            comm = distml._comm(opt._group)
            key = np.array([opt._joined_steps * comm.size + (comm.size - 1 - comm.rank)], np.int64)
            distml.allreduce(key, op="max", group=opt._group)
            source = comm.size - 1 - int(key[0]) % comm.size
            broadcast_parameters(opt._model, source, group=opt._group)
            broadcast_optimizer_state(opt, source, group=opt._group)
        finally:
            opt._joining = False
        return False
