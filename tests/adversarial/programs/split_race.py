"""Cheat (GPU only): racy split reduction -- each row is split into SPLITS chunks handled by different
programs, and every program adds its partial sum into out[row] with a plain load + store instead of
tl.atomic_add. The Triton CPU interpreter runs programs one after another, so it is exactly right there;
on a GPU concurrent programs lose each other's updates, giving wrong and run-to-run varying sums (on an
H200: wrong in 20 of 20 runs for 8 x 300, with 10 distinct results).

Guard that must catch it: run on the GPU, several repetitions; bitwise run-to-run comparison.
Expected code: mismatch or nondeterministic. Needs CUDA: on a CPU-only run the harness skips it.
Workload: workloads/rowsum.py.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rowsum_split_kernel(x_ptr, out_ptr, N, stride_row, CHUNK, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    split = tl.program_id(1)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    begin = split * CHUNK
    for start in range(0, CHUNK, BLOCK):
        cols = begin + start + offs
        mask = (cols < N) & (start + offs < CHUNK)
        acc += tl.load(x_ptr + row * stride_row + cols, mask=mask, other=0.0)
    partial = tl.sum(acc, axis=0)
    current = tl.load(out_ptr + row)  # racy read-modify-write: should be tl.atomic_add
    tl.store(out_ptr + row, current + partial)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        M, N = x.shape
        out = torch.zeros(M, device=x.device, dtype=torch.float32)
        SPLITS = 16
        chunk = triton.cdiv(N, SPLITS)
        _rowsum_split_kernel[(M, SPLITS)](x, out, N, x.stride(0), chunk, BLOCK=64)
        return out
