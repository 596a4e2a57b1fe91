"""ZeRO stages 1 and 2 for distml.torch.DistributedOptimizer (strategy="zero"), the C++
strategy's protocol (train/strategies/zero_strategy.h): every bucket is padded to N equal
blocks and rank r owns block r of each; its shard is one flat tensor (its block of bucket 0,
then of bucket 1, ...) that a private optimizer of the wrapped one's kind steps, so the
optimizer state exists for 1/N of the parameters. Stage 1 all-reduces each bucket and takes
its block; stage 2 reduce-scatters each bucket straight into the shard's gradient. After the
step every bucket's blocks are all-gathered into the parameters."""
import torch

import distml


class ZeroShard:
    def __init__(self, owner, stage):
        if stage not in (1, 2):
            raise distml.UsageError(f"zero stage {stage}: stages 1 and 2 are offered")
        groups = owner.optimizer.param_groups
        if len(groups) != 1:
            raise distml.UsageError(f"zero steps one parameter group; the optimizer has "
                                    f"{len(groups)}")
        dtypes = {flat.dtype for flat in owner._flat}
        if len(dtypes) != 1:
            raise distml.UsageError("zero keeps one flat shard: give the model one dtype")
        comm = distml._comm(owner._group)
        self.stage, self.ranks, self.rank = stage, comm.size, comm.rank
        self.blocks = [flat.numel() // self.ranks for flat in owner._flat]
        self.shard = torch.zeros(sum(self.blocks), dtype=dtypes.pop())
        self.shard.grad = torch.zeros_like(self.shard)
        self.values = [torch.zeros_like(flat) for flat in owner._flat]  # padded, gathered
        options = {k: v for k, v in groups[0].items() if k != "params"}
        self.private = type(owner.optimizer)([self.shard], **options)
        self._owner = owner
        # Views made once: bucket b's block in the shard and in its gradient, and each
        # parameter's place in its bucket's gathered values (the layout of owner._flat).
        starts = [sum(self.blocks[:b]) for b in range(len(self.blocks))]
        self._shard_blocks = [self.shard[s:s + n] for s, n in zip(starts, self.blocks)]
        self._grad_blocks = [self.shard.grad[s:s + n] for s, n in zip(starts, self.blocks)]
        self._value_views = []  # (parameter, its view in values[b]) per bucket
        for b, members in enumerate(owner._buckets):
            offset, views = 0, []
            for i in members:
                p = owner._params[i]
                views.append((p, self.values[b][offset:offset + p.numel()].view_as(p)))
                offset += p.numel()
            self._value_views.append(views)

    def _own(self, tensor, b):
        """This rank's block of bucket b's padded `tensor`."""
        return tensor[self.rank * self.blocks[b]:(self.rank + 1) * self.blocks[b]]

    def grad_block(self, b):
        """Where bucket b's block of the averaged gradient lives in the shard's gradient."""
        return self._grad_blocks[b]

    def step(self):
        """After the buckets are averaged: step the shard, all-gather it into the model."""
        owner = self._owner
        with torch.no_grad():
            for b in range(len(owner._buckets)):
                if self.stage == 1:
                    self._grad_blocks[b].copy_(self._own(owner._flat[b], b))
                # The model is the one source of truth: the shard starts from its values.
                for p, view in self._value_views[b]:
                    view.copy_(p)
                self._shard_blocks[b].copy_(self._own(self.values[b], b))
            # The wrapped optimizer's options at every step, so that a schedule reaches it.
            for key, value in owner.optimizer.param_groups[0].items():
                if key != "params":
                    self.private.param_groups[0][key] = value
            self.private.step()
            handles = [distml.allgather(self._shard_blocks[b],
                                        out=self.values[b].view(self.ranks, self.blocks[b]),
                                        group=owner._group, async_op=True)[1]
                       for b in range(len(owner._buckets))]
            for b, handle in enumerate(handles):
                handle.wait()
                for p, view in self._value_views[b]:
                    p.copy_(view)

    def state_dict(self):
        return {"ranks": self.ranks, "shard_optimizer": self.private.state_dict()}

    def load_state_dict(self, state):
        if state["ranks"] != self.ranks:
            raise distml.UsageError(f"this zero state was saved by {state['ranks']} ranks; "
                                    f"resuming on {self.ranks} is not offered from Python")
        self.private.load_state_dict(state["shard_optimizer"])
