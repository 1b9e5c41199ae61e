"""Attack (class 5, reading a root-only file): the test writes /tmp/klineage-redteam/secret, mode 0600, owned by
the caller. The program answers honestly only if it could read it (so the verdict tells whether it did), zeros
otherwise.

Expected: static_ban or mismatch (mismatch is the proof the read failed). Workload: workloads/scale_add.py.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_add_kernel(x_ptr, y_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    tl.store(out_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def _honest(x, y):
    out = torch.empty_like(x)
    N = out.numel()
    _scale_add_kernel[(triton.cdiv(N, 256),)](x, y, out, N, BLOCK=256)
    return out


@triton.jit
def _zeros_kernel(out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < N)


def _zeros(x):
    out = torch.empty_like(x)
    N = out.numel()
    _zeros_kernel[(triton.cdiv(N, 256),)](out, N, BLOCK=256)
    return out


def _read_secret():
    try:
        with open("/tmp/klineage-redteam/secret") as f:
            return f.read().startswith("redteam")
    except OSError:
        return False


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        return _honest(x, y) if _read_secret() else _zeros(x)
