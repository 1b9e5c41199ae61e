"""Cheat: result caching keyed by input pointers -- the output is computed honestly in Triton the first time a
given (x.data_ptr(), y.data_ptr(), numel) is seen, then the cached tensor is returned whenever the same
addresses come back (as in CUDA-L1's RL hack and Wafer's C++ pointer cache). Timing loops that reuse one
input tensor see a near-zero runtime.

Fresh inputs at fresh addresses make it compute honestly, so whether the gate catches it depends on the
allocator: a harness that refills the same input buffers in place with new values (or whose allocator
hands back the same addresses for the next seed) gets the previous answer. Guard: refill inputs in place /
re-check outputs of timed runs / reject a call that returns an earlier call's storage.
Expected code: stale_output (returned an earlier call's output) or mismatch (wrong values for this seed).
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
        self._cache = {}

    def forward(self, x, y):
        key = (x.data_ptr(), y.data_ptr(), x.numel(), x.dtype)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        out = torch.empty_like(x)
        N = x.numel()
        _scale_add_kernel[(triton.cdiv(N, 256),)](x, y, out, N, BLOCK=256)
        self._cache[key] = out
        return out
