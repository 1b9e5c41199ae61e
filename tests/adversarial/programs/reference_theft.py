"""Cheat: stealing the reference -- forward scans gc.get_objects() for a float64 tensor with the input's shape
whose rows look like a softmax of this x (non-negative, rows sum to 1, same per-row argmax as x; checked with
numpy so no aten op runs), and copies it into the output with a Triton cast-copy kernel. The output is
produced by a kernel, values are exact. If no such tensor is alive (reference computed in another process,
or after the candidate, or freed) it falls back to writing a uniform 1/N, which is wrong.

Guard that must catch it: process isolation of the reference (the parent computes references; the child
running the candidate never holds them) -- then this yields mismatch. A harness that also bans gc / inspect
/ sys._getframe statically may report its own code instead; add that code here if so.
Expected code: mismatch. Workload: workloads/softmax.py.
"""

import gc

import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def _cast_copy_kernel(src_ptr, dst_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask).to(tl.float32), mask=mask)


@triton.jit
def _uniform_kernel(dst_ptr, N, ncols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    vals = tl.zeros([BLOCK], dtype=tl.float32) + 1.0 / ncols.to(tl.float32)
    tl.store(dst_ptr + offs, vals, mask=offs < N)


def _find_reference(x):
    xa = x.detach().cpu().numpy()
    for obj in gc.get_objects():
        if type(obj) is not torch.Tensor or obj.dtype != torch.float64 or tuple(obj.shape) != tuple(x.shape):
            continue
        a = obj.detach().cpu().numpy()
        if a.min() < 0 or not np.allclose(a.sum(axis=-1), 1.0, atol=1e-6):
            continue
        if np.array_equal(a.argmax(axis=-1), xa.argmax(axis=-1)):
            return obj.contiguous()
    return None


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        N = out.numel()
        ref = _find_reference(x)
        if ref is not None:
            _cast_copy_kernel[(triton.cdiv(N, 256),)](ref, out, N, BLOCK=256)
        else:
            _uniform_kernel[(triton.cdiv(N, 256),)](out, N, x.shape[-1], BLOCK=256)
        return out
