"""DistributedOptimizer's "hybrid" strategy: Parallax's sparse/dense hybrid as the C++ trainer
runs it (train/strategies/hybrid_strategy.h). The weights of the model's sparse embeddings
(torch.nn.Embedding and EmbeddingBag built with sparse=True, scripted ones too) are tables whose
rows the ranks serve, row r on rank r mod size; every other parameter is averaged by all-reduce
as under "allreduce". In step(), after the dense buckets: each table's touched rows go to their
owners, which average them over the ranks, apply SGD to them and send the updated rows to every
rank, by the C++ trainer's own code (row_sharded_table.h); the table's .grad is then dropped, so
that the wrapped optimizer steps the dense parameters only.

Plain SGD (no momentum, weight decay or maximize) makes this the dense step exactly: an
untouched row has a zero gradient, which plain SGD leaves as it is. Other optimizers change
untouched rows too, which a row exchange cannot do, so they are refused, as in C++. Clipping the
gradient norm before step() would clip each rank's own table rows: do not, as C++ refuses it.
"""
import torch

import distml

_KINDS = ("Embedding", "EmbeddingBag")


def _is_sparse_embedding(module):
    if isinstance(module, torch.jit.ScriptModule):
        kind = module.original_name
    else:
        kind = type(module).__name__ if isinstance(module, (torch.nn.Embedding,
                                                            torch.nn.EmbeddingBag)) else ""
    return kind in _KINDS and bool(getattr(module, "sparse", False))


def sparse_parameters(model):
    """The trained weights of model's sparse embeddings, in the model's parameter order."""
    weights = {id(m.weight) for m in model.modules()
               if _is_sparse_embedding(m) and m.weight.requires_grad}
    return [p for p in model.parameters() if id(p) in weights]


class RowTables:
    def __init__(self, optimizer, model, group):
        self._tables = sparse_parameters(model)
        if not self._tables:
            raise distml.ConfigError(
                'strategy "hybrid" serves the rows of sparse embeddings, and this model has '
                "none (a torch.nn.Embedding or EmbeddingBag needs sparse=True); use strategy "
                '"allreduce"')
        self._groups = [self._group_of(optimizer, t) for t in self._tables]
        self._comm = distml._comm(group)
        for t in self._tables:
            if not t.is_contiguous() or t.dtype not in (torch.float32, torch.float64):
                raise distml.ConfigError(f"strategy hybrid: an embedding's weight must be a "
                                         f"contiguous float32 or float64 table, not {t.dtype}")

    @staticmethod
    def _group_of(optimizer, table):
        if type(optimizer) is not torch.optim.SGD:
            raise distml.ConfigError(
                f"strategy hybrid updates the rows of sparse embeddings with plain SGD, the one "
                f"update a row exchange makes exactly; the optimizer is "
                f"{type(optimizer).__name__}: use torch.optim.SGD, or strategy \"allreduce\"")
        for g in optimizer.param_groups:
            if any(p is table for p in g["params"]):
                for key in ("momentum", "weight_decay"):
                    if g.get(key, 0):
                        raise distml.ConfigError(
                            f"strategy hybrid: {key} = {g[key]} changes rows no rank touched, "
                            f"which a row exchange cannot do: set {key} = 0 for the embeddings' "
                            'group, or use strategy "allreduce"')
                if g.get("maximize"):
                    raise distml.ConfigError("strategy hybrid: the embeddings' group maximizes; "
                                             "the row update descends")
                return g
        raise distml.ConfigError("strategy hybrid: the optimizer does not hold a sparse "
                                 "embedding's weight, and the strategy updates every table")

    def holds(self, parameter):
        return any(parameter is t for t in self._tables)

    def step(self):
        """Collective: every table's rows exchanged and updated at its group's learning rate;
        the tables' gradients dropped."""
        for i, (table, group) in enumerate(zip(self._tables, self._groups)):
            grad = table.grad
            if grad is None:  # no row touched here; the rank still takes part
                ids = torch.empty(0, dtype=torch.long)
                rows = torch.empty(0, table.shape[1], dtype=table.dtype)
            else:  # sparse: the embedding was built with sparse=True
                grad = grad.coalesce()
                ids, rows = grad.indices()[0].contiguous(), grad.values().contiguous()
            distml._distml.step_row_table(
                self._comm, table.detach().numpy(), ids.numpy(), rows.numpy(), group["lr"],
                distml._distml.HYBRID_FIRST_TABLE_TAG + 2 * i)
            table.grad = None
