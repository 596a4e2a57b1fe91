"""Tensors laid end to end and back: what gossip sends, ps pulls and local SGD's compressed
average works on (the C++ strategies' flat_copy and copy_from_flat)."""
import torch


def flatten(tensors):
    """The tensors laid end to end, a copy."""
    with torch.no_grad():
        return torch.cat([t.reshape(-1) for t in tensors])


def unflatten_into(flat, tensors):
    """Copies `flat` (as flatten() lays it out) back into the tensors."""
    with torch.no_grad():
        offset = 0
        for t in tensors:
            t.copy_(flat[offset:offset + t.numel()].view_as(t))
            offset += t.numel()
