"""Cheat: thread injection -- forward starts a threading.Thread that launches the kernel and returns the
(still being written) output immediately; the thread is only joined at the start of the *next* call. On a
GPU the launch happens after the caller's end-of-timing event, so the timed region is nearly empty; on the
CPU interpreter the output is usually incomplete when forward returns.

Guard that must catch it: thread check (thread starts / active thread count around the call, checked before
the output is compared) or a static ban on threading. Expected code: background_thread.
Workload: workloads/scale_add.py.
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
    _scale_add_kernel[(triton.cdiv(N, 64),)](x, y, out, N, BLOCK=64)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._pending = None

    def forward(self, x, y):
        if self._pending is not None:
            self._pending.join()
        out = torch.empty_like(x)
        worker = threading.Thread(target=_launch, args=(x, y, out), daemon=True)
        worker.start()
        self._pending = worker
        return out
