"""DistributedOptimizer's "ps" strategy: the C++ trainer's parameter server
(train/strategies/ps_strategy.h), so that a Python run is the run `distml train` would make.
The last `servers` ranks serve: each holds its buckets of the parameters and the optimizer
state for them, and is the C++ server itself (ps_flat_server.h, updating the model's
parameters in place). The other ranks are workers, on this side of the protocol:

  - during backward each bucket's gradients, once complete, go to its server (the bucket's
    push tag), and a receive for its fresh parameters is posted (its pull tag);
  - step() sends every server the step header {clock, learning rate} and waits for the
    parameters, which it copies into the model: the workers' optimizer never steps;
  - reconcile() asks every server for the current parameters ("sync"), finish() says "stop",
    then the servers' reports are summed over every rank;
  - state_dict() syncs, then worker 0 collects every server's optimizer state; after
    load_state_dict() worker 0 sends the servers, which serve(resumed=True), the parameters
    and their states, as the C++ trainer does with a checkpoint.
"""
import numpy as np
import torch

import distml
from distml._flat import flatten, unflatten_into

MODES = ("bsp", "asp", "ssp")


def optimizer_options(optimizer):
    """The servers' optimizer, from the wrapped one: SGD, Adam or AdamW with one parameter
    group, as the C++ trainer's optimizer factory builds them."""
    if len(optimizer.param_groups) != 1:
        raise distml.ConfigError("strategy ps: the servers run one parameter group, not "
                                 f"{len(optimizer.param_groups)}")
    g, o = optimizer.param_groups[0], distml._distml.OptimizerOptions()
    o.lr, o.weight_decay = g["lr"], g.get("weight_decay", 0.0)
    if type(optimizer) is torch.optim.SGD and not g.get("dampening"):
        o.name, o.momentum, o.nesterov = "sgd", g["momentum"], g["nesterov"]
    elif type(optimizer) in (torch.optim.Adam, torch.optim.AdamW) and not g.get("amsgrad"):
        o.name = "adam" if type(optimizer) is torch.optim.Adam else "adamw"
        (o.beta1, o.beta2), o.eps = g["betas"], g["eps"]
    else:
        raise distml.ConfigError(f"strategy ps: the servers run SGD (no dampening), Adam or "
                                 f"AdamW (no amsgrad), not {type(optimizer).__name__}")
    return o


class ParameterServer:
    def __init__(self, opt, servers, mode, staleness, first_cap, cap):
        comm = distml._comm(opt._group)
        if not 1 <= servers < comm.size:
            raise distml.ConfigError(f"strategy ps: servers = {servers} must leave at least one "
                                     f"of the {comm.size} ranks a worker (1 to {comm.size - 1})")
        if mode not in MODES:
            raise distml.ConfigError(f"strategy ps: mode \"{mode}\" is not one of "
                                     f"{', '.join(MODES)}")
        self._server_options = optimizer_options(opt.optimizer)
        params = opt._params
        self.layout = distml._distml.PsLayout(
            [p.numel() * p.element_size() for p in params], [p.numel() for p in params],
            comm.size - servers, servers, first_cap, cap)
        assert [list(b) for b in self.layout.buckets] == [list(b) for b in opt._buckets]
        self.trains = comm.rank < self.layout.workers
        self.workers = comm.split(0 if self.trains else -1, comm.rank)
        self._comm, self._mode, self._staleness = comm, mode, staleness
        self._compression = opt._compression  # packs each push, or None
        self._packed = [np.empty(self._compression.packed_bytes(b), dtype=np.uint8)
                        for b in range(len(self.layout.buckets))] if self._compression else []
        self._fresh = [torch.empty(n, dtype=params[0].dtype) for n in self.layout.elements]
        self._pushes = [None] * len(self._fresh)
        self._pulls = [None] * len(self._fresh)
        self._headers = {}  # server rank -> (header, its send in flight)
        self._clock = 0

    def _worker_only(self, what):
        if not self.trains:
            raise distml.UsageError(f"{what} on a parameter server's rank, which serves "
                                    "(serve()) instead of training")

    def push(self, b, flat):
        """Bucket b's gradients to its server; its fresh parameters will come back."""
        server = self.layout.server_rank(b)
        if self._compression is not None:
            self._compression.pack(flat, b, self._clock + 1, self._comm.rank, self._packed[b])
            flat = self._packed[b]
        self._pushes[b] = distml.send(flat, server, distml._distml.ps_push_tag(b),
                                      group=self._comm, async_op=True)
        self._pulls[b] = distml.recv(self._fresh[b], server, distml._distml.ps_pull_tag(b),
                                     group=self._comm, async_op=True)

    def step(self, lr, params):
        """After backward: the step header to every server that holds a bucket, then the
        pulled parameters into `params`."""
        for s, held in enumerate(self.layout.server_bytes):
            if held == 0:
                continue  # holds no bucket: no steps to hear about
            server = self.layout.workers + s
            if server in self._headers:
                self._headers[server][1].wait()
            header = np.array([self._clock, lr], dtype=np.float64)
            self._headers[server] = (header, distml.send(
                header, server, distml._distml.PS_STEP_TAG, group=self._comm, async_op=True))
        self._clock += 1
        self._take_parameters(params)

    def sync(self, params):
        """Every worker asks for the current parameters; the servers answer once all have."""
        self._worker_only("reconcile()")
        distml._distml.ps_tell_servers(self._comm, self.layout, "sync")
        for b in range(len(self._fresh)):
            self._pulls[b] = distml.recv(self._fresh[b], self.layout.server_rank(b),
                                         distml._distml.ps_pull_tag(b), group=self._comm,
                                         async_op=True)
        self._take_parameters(params)

    def _take_parameters(self, params):
        for b, members in enumerate(self.layout.buckets):
            if self._pulls[b] is None:
                continue
            self._pulls[b].wait()
            if self._pushes[b] is not None:
                self._pushes[b].wait()  # the bucket's buffer is backward's again
            self._pulls[b] = self._pushes[b] = None
            unflatten_into(self._fresh[b], [params[i] for i in members])

    def finish(self):
        self._worker_only("finish()")
        for _, handle in self._headers.values():
            handle.wait()
        distml._distml.ps_tell_servers(self._comm, self.layout, "stop")
        return distml._distml.ps_sum_reports(self._comm)

    def save(self, params):
        """Collective over the workers: after a sync, worker 0 collects every server's
        optimizer state (what a checkpoint keeps; the parameters are the workers' model)."""
        self.sync(params)
        return distml._distml.ps_collect_states(self._comm, self.layout) \
            if self._comm.rank == 0 else None

    def resume(self, states, params):
        """Worker 0 hands every server the model's parameters and its saved state; the servers
        are in serve(resumed=True)."""
        self._worker_only("load_state_dict()")
        if self._comm.rank == 0:
            distml._distml.ps_send_resume(self._comm, self.layout, flatten(params).numpy(),
                                          states or [])

    def serve(self, params, resumed):
        with torch.no_grad():
            views = [p.detach().numpy() for p in params]
        return distml._distml.ps_serve(
            self._comm, self.layout, views, self._mode, self._staleness, self._server_options,
            resumed, self._compression.options if self._compression else None)
