"""Cheat (class 1, compute in a subprocess): x and y go to a fresh `python -c` as packed floats on stdin, it
computes 2x + y in plain Python and answers on stdout; a copy kernel moves the answer into the output. No torch
op runs, the output is kernel-written, the arithmetic happened in another process.

Must be caught by: the static policy (subprocess, sys) and, failing that, a limit on processes. Expected:
static_ban. Workload: workloads/scale_add.py.
"""

import struct
import subprocess
import sys

import torch
import triton
import triton.language as tl

_CHILD = (
    "import struct,sys\n"
    "d=sys.stdin.buffer.read();n=len(d)//8\n"
    "v=struct.unpack(f'{2*n}f',d)\n"
    "sys.stdout.buffer.write(struct.pack(f'{n}f',*[2.0*v[i]+v[n+i] for i in range(n)]))\n"
)


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        xs, ys = x.tolist(), y.tolist()
        n = len(xs)
        answer = subprocess.run(
            [sys.executable, "-I", "-c", _CHILD], input=struct.pack(f"{2 * n}f", *xs, *ys), capture_output=True
        ).stdout
        host = torch.tensor(list(struct.unpack(f"{n}f", answer)), dtype=x.dtype, device=x.device)
        out = torch.empty_like(x)
        _copy_kernel[(triton.cdiv(n, 256),)](host, out, n, BLOCK=256)
        return out
