"""An installed kernel compiled for sm_90 at several warp counts, without a GPU: registers and spills per thread.

    GEMS_VENDOR=nvidia PYTHONPATH=SITE:src python benchmarks/static_spills.py \\
        flag_gems.ops.groupnorm:group_norm_kernel --ptr X,Y,W,B,Mean,Rstd --float eps \\
        --const BLOCK_GROUP_SIZE=32 --const BLOCK_HW_SIZE=4096 [--dtype fp32] [--warps 4,8,16,32]

The parameters --ptr names are typed `*DTYPE`, those --float names fp32, the constexprs take --const's values, every
other one is i32. What the compile gate
records of each specialization (`sass.kernel_metrics`); a tile held in registers that spills kilobytes a thread at
every warp count is a tile no launch knob fixes. The host code's CUDA calls run on the CPU (`cuda_on_cpu`), as the
gates' CPU path runs them, so a library that asks for a device at import loads here.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel", help="module:name of a Triton kernel (under any wrapper: libentry, autotune)")
    parser.add_argument("--const", action="append", default=[], help="NAME=VALUE of a constexpr; repeatable")
    parser.add_argument("--ptr", default="", help="comma-separated pointer parameters (typed *DTYPE)")
    parser.add_argument("--float", action="append", default=[], help="a scalar parameter typed fp32; repeatable")
    parser.add_argument("--dtype", default="fp32", help="element type of the pointer parameters (fp32, bf16, ...)")
    parser.add_argument("--warps", default="4,8,16,32")
    args = parser.parse_args()

    from klineage.cuda_on_cpu import install

    install()
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from klineage.sass import kernel_metrics

    module_name, name = args.kernel.split(":")
    fn = getattr(importlib.import_module(module_name), name)
    while not isinstance(fn, triton.runtime.JITFunction):  # through libentry, autotune, heuristics
        fn = fn.fn
    consts = {k: int(v) for k, v in (c.split("=", 1) for c in args.const)}
    pointers = set(filter(None, args.ptr.split(",")))
    signature = {}
    for param in fn.arg_names:
        if param in consts:
            signature[param] = "constexpr"
        elif param in pointers:
            signature[param] = f"*{args.dtype}"
        else:
            signature[param] = "fp32" if param in args.float else "i32"
    print(f"command: {' '.join(sys.argv)}")
    today = f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d}"
    print(f"sm_90 by Triton {triton.__version__}'s bundled compiler; {today} UTC")
    print(f"signature: {signature}")
    print("\n| warps | registers | spill stores / loads (bytes a thread) |\n|---|---|---|")
    for warps in (int(w) for w in args.warps.split(",")):
        source = ASTSource(
            fn=fn, signature=signature, constexprs={(fn.arg_names.index(c),): v for c, v in consts.items()}
        )
        compiled = triton.compile(source, target=GPUTarget("cuda", 90, 128), options={"num_warps": warps})
        m = kernel_metrics(compiled, "sm_90")
        print(f"| {warps} | {m.get('registers')} | {m.get('spill_store_bytes')} / {m.get('spill_load_bytes')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
