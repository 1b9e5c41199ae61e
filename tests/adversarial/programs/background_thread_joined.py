"""Cheat (guard probe): thread injection that is joined before returning, so the output is fully correct.
Only a thread guard (thread starts during the call, or a static threading ban) can flag it; the value
comparison cannot. Expected code: background_thread. Workload: workloads/scale_add.py.
"""

import threading

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

    def forward(self, x, y):
        out = torch.empty_like(x)
        worker = threading.Thread(target=_launch, args=(x, y, out))
        worker.start()
        worker.join()
        return out
