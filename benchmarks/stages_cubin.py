"""Whether a launch's num_stages changes the compiled kernel, without a GPU: three small kernels compiled for sm_90
at 1-4 stages (Triton's bundled ptxas), each cubin's hash and the loads the pipeliner made asynchronous.

    PYTHONPATH=src python benchmarks/stages_cubin.py

A loop whose loads feed `tl.dot` compiles differently at each stage count (its loads become cp.async copies from
2 stages on); a loop of plain loads and a loop-free kernel compile to the same cubin at every count: their launch's
num_stages changes nothing on the GPU (`proposers.base.idle_stages`). Pointers are specialized as aligned (16), as a
launch of aligned tensors is: without that no load can be copied asynchronously and no loop is pipelined at all.
"""

from __future__ import annotations

import datetime
import hashlib
import sys

import triton
import triton.language as tl

from klineage.sass import kernel_metrics


@triton.jit
def dot_loop(a_ptr, b_ptr, c_ptr, K, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK, BLOCK], dtype=tl.float32)
    for k in range(0, K, BLOCK):
        a = tl.load(a_ptr + offs[:, None] * K + k + offs[None, :])
        b = tl.load(b_ptr + (k + offs[:, None]) * BLOCK + offs[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + offs[:, None] * BLOCK + offs[None, :], acc)


@triton.jit
def plain_loop(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * n + cols, mask=cols < n, other=0.0)
    tl.store(y_ptr + row, tl.sum(acc, axis=0))


@triton.jit
def loop_free(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=float("-inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * n + cols, e / tl.sum(e, axis=0), mask=cols < n)


KERNELS = {
    "dot_loop": (dot_loop, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32"}, 64),
    "plain_loop": (plain_loop, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}, 1024),
    "loop_free": (loop_free, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}, 1024),
}


def compiled(name: str, stages: int, warps: int = 4):
    """`name` compiled for sm_90 at `stages`, its pointers specialized as 16-byte aligned."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn, signature, block = KERNELS[name]
    pointers = [i for i, kind in enumerate(signature.values()) if kind.startswith("*")]
    source = ASTSource(
        fn,
        {**signature, "BLOCK": "constexpr"},
        {"BLOCK": block},
        {(i,): [["tt.divisibility", 16]] for i in pointers},
    )
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages})


def main() -> int:
    print(f"# {' '.join(sys.argv)}: Triton {triton.__version__}, sm_90, {datetime.date.today()}, no GPU")
    print("| kernel | stages | cubin | pipelined loads |")
    print("|---|---|---|---|")
    for name in KERNELS:
        for stages in (1, 2, 3, 4):
            kernel = compiled(name, stages)
            digest = hashlib.sha1(kernel.asm["cubin"]).hexdigest()[:10]
            print(f"| {name} | {stages} | {digest} | {kernel_metrics(kernel, 'sm_90').get('pipelined_loads')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
