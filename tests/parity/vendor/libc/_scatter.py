"""Import shim for the LIBC release (a1ae3de): the three ``torch_scatter`` functions it calls,
on ``torch.Tensor.scatter_add_`` / ``scatter_reduce_``, because torch_scatter has no wheel for
this environment's torch. torch_scatter's semantics: ``index`` (1-D) is broadcast along
``dim`` of ``src``; ``dim_size`` rows out; rows that receive nothing are 0; ``scatter_max``
returns ``(values, argmax)`` (the release reads the values only, so ``argmax`` is None here).
The release's maths is not touched.
"""

import torch


def _index(src, index, dim):
    shape = [1] * src.dim()
    shape[dim] = -1
    return index.view(shape).expand_as(src)


def _out(src, dim, dim_size):
    size = list(src.shape)
    size[dim] = dim_size
    return src.new_zeros(size)


def scatter_add(src, index, dim=-1, dim_size=None):
    return _out(src, dim, dim_size).scatter_add_(dim, _index(src, index, dim), src)


def scatter_max(src, index, dim=-1, dim_size=None):
    out = _out(src, dim, dim_size).scatter_reduce_(
        dim, _index(src, index, dim), src, "amax", include_self=False
    )
    return out, None


def scatter_mean(src, index, dim=-1, dim_size=None):
    total = scatter_add(src, index, dim, dim_size)
    count = scatter_add(torch.ones_like(src), index, dim, dim_size)
    return total / count.clamp(min=1)
