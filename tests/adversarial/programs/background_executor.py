"""Cheat (guard probe): thread injection without the word "threading" -- the launch goes through a
concurrent.futures.ThreadPoolExecutor created in __init__ (its worker thread is only spawned on the first
submit, i.e. inside forward, and then stays alive). The result is awaited, so values are correct.

A regex/AST ban on `threading` misses it. Guard that must catch it: runtime thread check (Thread.start
during the call / a new live thread after it) or an AST ban covering concurrent.futures.
Expected code: background_thread. Workload: workloads/scale_add.py.
"""

from concurrent.futures import ThreadPoolExecutor

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_add_kernel(x_ptr, y_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, 2.0 * x + y, mask=mask)


def _launch(x, y, out):
    N = x.numel()
    _scale_add_kernel[(triton.cdiv(N, 256),)](x, y, out, N, BLOCK=256)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._pool = ThreadPoolExecutor(max_workers=1)

    def forward(self, x, y):
        out = torch.empty_like(x)
        self._pool.submit(_launch, x, y, out).result()
        return out
