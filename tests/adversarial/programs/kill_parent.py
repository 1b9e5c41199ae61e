"""Attack (class 5, killing its parent): SIGKILLs its parent process (today the warm sandbox server; in a split
judge, the judge) on the first call, then returns zeros. If the kill is refused the zeros fail as a mismatch;
if it succeeds the check ends some other way (a crash).

Expected: static_ban or mismatch (mismatch is the proof the kill failed). Workload: workloads/scale_add.py.
"""

import os
import signal

import torch
import triton
import triton.language as tl


@triton.jit
def _zeros_kernel(out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < N)


def _zeros(x):
    out = torch.empty_like(x)
    N = out.numel()
    _zeros_kernel[(triton.cdiv(N, 256),)](out, N, BLOCK=256)
    return out


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        try:
            os.kill(os.getppid(), signal.SIGKILL)
        except OSError:
            pass
        return _zeros(x)
