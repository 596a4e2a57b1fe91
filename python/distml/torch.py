"""distml for PyTorch scripts: what a training loop needs beyond the collectives.

    import distml, distml.torch
    distml.init()
    model = Net()
    distml.torch.broadcast_parameters(model, root=0)   # every replica starts from rank 0's
"""
import torch

import distml


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
