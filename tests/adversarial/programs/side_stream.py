"""Cheat (GPU only): stream injection -- the kernel is launched on a private torch.cuda.Stream() and forward
returns without synchronising it with the caller's stream. CUDA events recorded on the current stream do
not wait for it, so the measured time is near zero. On an H200 the output was already complete when a
default-stream comparison read it (6 of 6 trials, N = 1000 and 2**26), so values never give it away.

Guard that must catch it: stream check (current stream at every launch must be the caller's stream;
torch.cuda.Stream / torch.cuda.stream use flagged) plus a device-wide sync before the end event.
Expected code: side_stream. Needs CUDA: on a CPU-only run the harness skips it.
Workload: workloads/scale_add.py.
"""

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


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._stream = None

    def forward(self, x, y):
        if self._stream is None:
            self._stream = torch.cuda.Stream(device=x.device)
        out = torch.empty_like(x)
        N = x.numel()
        with torch.cuda.stream(self._stream):
            _scale_add_kernel[(triton.cdiv(N, 1024),)](x, y, out, N, BLOCK=1024)
        return out  # no self._stream.synchronize(), no wait_stream
