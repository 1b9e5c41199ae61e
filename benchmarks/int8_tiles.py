"""Re-time torchao's int8 matmul kernels under the tiles each method kept, outside the tool.

The wild-quant starts launch `int_matmul_kernel` / `int_scaled_matmul_kernel` (torchao.kernel.intmm_triton) with
torchao's first tuner config (32 x 32 x 32, 1 warp, 1 stage). Blind and autotune kept BLOCK_M 128 there; KLineage
kept the bundled matmul expert's 256 x 128 x 64 tile at 8 warps and 3 stages (docs/runs/2026-12-06-h100-wild7, a
run cut before its re-times). This times each config in one process, rounds interleaved, after checking it against
`torch._int_mm` exactly; torch._int_mm itself is timed as the vendor line.

    PYTHONPATH=SITE python3 benchmarks/int8_tiles.py [--size 4096] [--rounds 5] [--json OUT]
    PYTHONPATH=SITE:src python3 benchmarks/int8_tiles.py --static   # no GPU needed

`--static` compiles `int_matmul_kernel`'s kernel under each config for sm_90 with Triton's bundled compiler and
prints what ptxas reports (registers, spill bytes) and the SASS's tensor-core instructions: no GPU, nothing timed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import sys

CONFIGS = {  # name: (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_stages, num_warps)
    "start (torchao config 0)": (32, 32, 32, 8, 1, 1),
    "blind/autotune: BLOCK_M 128": (128, 32, 32, 8, 1, 1),
    "klineage: expert 256x128x64": (256, 128, 64, 8, 3, 8),
    "expert 128x256x64": (128, 256, 64, 8, 3, 8),
    "expert 128x256x64, 4 stages": (128, 256, 64, 8, 4, 8),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", default=None)
    parser.add_argument("--static", action="store_true", help="compile for sm_90 and report spills; time nothing")
    args = parser.parse_args()
    if args.static:
        return static()

    import torch
    import triton
    from torchao.kernel.intmm_triton import int_matmul_kernel, int_scaled_matmul_kernel
    from triton.testing import do_bench

    if not torch.cuda.is_available():
        print("no GPU: nothing timed")
        return 2
    n = args.size
    torch.manual_seed(0)
    a = torch.randint(-128, 128, (n, n), dtype=torch.int8, device="cuda")
    b = torch.randint(-128, 128, (n, n), dtype=torch.int8, device="cuda")
    scales = torch.rand(n, 1, device="cuda") * 0.01
    expected = torch._int_mm(a, b)
    expected_scaled = expected * scales

    def call(kind: str, cfg: tuple) -> object:
        bm, bn, bk, gm, stages, warps = cfg
        config = triton.Config(
            {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": gm}, num_warps=warps, num_stages=stages
        )
        if kind == "int_matmul":
            c = torch.empty((n, n), dtype=torch.int32, device="cuda")
            return lambda: int_matmul_kernel(a, b, c, config)
        c = torch.empty((n, n), dtype=scales.dtype, device="cuda")
        return lambda: int_scaled_matmul_kernel(a, b, scales, c, config)

    rows = []
    calls = {}
    for kind in ("int_matmul", "int_scaled_matmul"):
        for name, cfg in CONFIGS.items():
            fn = call(kind, cfg)
            out = fn()
            torch.cuda.synchronize()
            if kind == "int_matmul":
                ok = bool(torch.equal(out, expected))
            else:
                ok = bool(torch.allclose(out, expected_scaled, rtol=1e-5, atol=1e-3))
            calls[(kind, name)] = fn
            rows.append({"kernel": kind, "config": name, "correct": ok, "ms": []})
        calls[(kind, "torch._int_mm")] = (
            (lambda: torch._int_mm(a, b)) if kind == "int_matmul" else (lambda: torch._int_mm(a, b) * scales)
        )
        rows.append({"kernel": kind, "config": "torch._int_mm", "correct": True, "ms": []})
    for _ in range(args.rounds):  # interleaved: drift lands on every config alike
        for row in rows:
            row["ms"].append(do_bench(calls[(row["kernel"], row["config"])], warmup=25, rep=100))
    for row in rows:
        row["median_ms"] = statistics.median(row["ms"])
        row["min_ms"], row["max_ms"] = min(row["ms"]), max(row["ms"])
        row["tops"] = 2 * n**3 / row["median_ms"] / 1e9

    print(f"command: {' '.join(sys.argv)}")
    print(
        f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}, Triton {triton.__version__}, "
        f"Python {platform.python_version()}; {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC"
    )
    print(f"{n}^3 int8, do_bench(warmup=25, rep=100) x {args.rounds} interleaved rounds: median [min, max]")
    for kind in ("int_matmul", "int_scaled_matmul"):
        start = next(r for r in rows if r["kernel"] == kind and r["config"].startswith("start"))
        print(f"\n| {kind} | correct | ms | vs start | TOP/s |\n|---|---|---|---|---|")
        for r in (r for r in rows if r["kernel"] == kind):
            print(
                f"| {r['config']} | {r['correct']} | {r['median_ms']:.4f} [{r['min_ms']:.4f}, {r['max_ms']:.4f}] "
                f"| x{start['median_ms'] / r['median_ms']:.3f} | {r['tops']:.0f} |"
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


def static() -> int:
    """Each config's kernel compiled for sm_90 (int8 operands, int32 output): registers, spills, tensor-core ops."""
    import triton
    from torchao.kernel.intmm_triton import matmul_kernel_with_block_pointers as kernel
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from klineage.sass import kernel_metrics

    pointers = {"a_ptr": "*i8", "b_ptr": "*i8", "c_ptr": "*i32"}
    signature = {name: pointers.get(name, "i32") for name in kernel.arg_names[:12]}
    print(f"command: {' '.join(sys.argv)}")
    print(
        f"sm_90 by Triton {triton.__version__}'s bundled compiler; {datetime.datetime.now(datetime.UTC):%Y-%m-%d} UTC"
    )
    print("\n| config | registers | spill stores / loads (bytes) | shared bytes | tensor-core ops |")
    print("|---|---|---|---|---|")
    for name, (bm, bn, bk, gm, stages, warps) in CONFIGS.items():
        consts = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": gm}
        source = ASTSource(
            fn=kernel,
            signature={**signature, **{c: "constexpr" for c in consts}},
            constexprs={(kernel.arg_names.index(c),): v for c, v in consts.items()},
        )
        compiled = triton.compile(
            source, target=GPUTarget("cuda", 90, 128), options={"num_warps": warps, "num_stages": stages}
        )
        m = kernel_metrics(compiled, "sm_90")  # what the compile gate records of each specialization
        print(
            f"| {name} | {m.get('registers')} | {m.get('spill_store_bytes')} / {m.get('spill_load_bytes')} "
            f"| {m['shared_bytes']} | {m.get('tensor_core_kinds')} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
