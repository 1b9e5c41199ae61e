"""The bundled matmul programs against cuBLAS (`torch.mm`) on one GPU: naive, tuned, the expert with its pointer
kernel forced, with its TMA kernel forced, and with its own dispatch ("auto"), all timed interleaved.

    python benchmarks/matmul_vs_cublas.py [--size 8192] [--dtype bfloat16] [--reps 60] [--extra PROGRAM.py] [--json OUT]

Each repetition flushes the L2 (writes a 512 MiB buffer) before every timed call and takes CUDA events around the
call; the methods take turns within a repetition, so drift in clocks or temperature hits all of them alike. Reported:
median, p20-p80 half-width relative to the median ("spread"), TFLOP/s at the median, and the ratio to torch.mm.
`triton.testing.do_bench` (its own 256 MB flush) is taken too, as a cross-check. Every program's output is checked
against an fp32 torch.mm of the same inputs first, on the bench size and on ragged and misaligned shapes.

The example files are loaded by path with importlib (the package's transforms need libcst, which a bare GPU image
may lack). The autotuners' own timings of every config they tried are printed as well. GPU only."""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import platform
import statistics
import subprocess
import sys
from pathlib import Path

import torch
import triton

ROOT = Path(__file__).resolve().parent.parent
MATMUL = ROOT / "src" / "klineage" / "examples" / "matmul"


def load(name: str, path: Path | None = None):
    path = path or MATMUL / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"matmul_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def git_commit() -> str:
    try:
        return (
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
            ).stdout.strip()
            or "unknown"
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def driver_version() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout.strip()
        return out.splitlines()[0] if out else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.float() - ref).norm() / ref.norm())


# workload.py's TOLERANCES["bfloat16"/"float16"]["norm"]
NORM_TOL = {torch.bfloat16: 1e-2, torch.float16: 5e-3}


def check_shapes(methods: dict, dtype: torch.dtype) -> list[dict]:
    """The expert's paths (and torch.mm) on ragged shapes, a K-divisible one, and a misaligned view (not TMA-able)."""
    rows = []
    gen = torch.Generator(device="cuda").manual_seed(1)
    shapes = [(48, 40, 72), (48, 40, 256), (1000, 1000, 1000), (777, 1531, 320)]
    for M, N, K in shapes:
        a = torch.randn(M, K, device="cuda", generator=gen).to(dtype)
        b = torch.randn(K, N, device="cuda", generator=gen).to(dtype)
        ref = torch.mm(a.float(), b.float())
        for name, fn in methods.items():
            if name == "expert_tma" and ((K * a.element_size()) % 16 or (N * a.element_size()) % 16):
                continue  # the forced TMA path refuses row strides that are not 16-byte multiples
            err = rel_error(fn(a, b), ref)
            rows.append({"shape": f"{M}x{N}x{K}", "method": name, "rel_error": err, "ok": err <= NORM_TOL[dtype]})
    # A misaligned base (one element in): the auto dispatch must fall back to the pointer kernel.
    M = N = K = 512
    buf_a = torch.randn(M * K + 1, device="cuda", generator=gen).to(dtype)
    a = buf_a[1:].view(M, K)
    b = torch.randn(K, N, device="cuda", generator=gen).to(dtype)
    ref = torch.mm(a.float(), b.float())
    for name in ("expert_auto", "expert_pointer"):
        err = rel_error(methods[name](a, b), ref)
        rows.append({"shape": "512^3 misaligned A", "method": name, "rel_error": err, "ok": err <= NORM_TOL[dtype]})
    return rows


def interleaved(methods: dict, a, b, reps: int, warmup: int) -> dict[str, list[float]]:
    """Round-robin over the methods; an L2 flush before every timed call; CUDA events around each call."""
    flush = torch.empty(512 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    times = {name: [] for name in methods}
    for rep in range(warmup + reps):
        for name, fn in methods.items():
            flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(a, b)
            end.record()
            end.synchronize()
            if rep >= warmup:
                times[name].append(start.elapsed_time(end))
    return times


def summarize(samples: list[float]) -> dict:
    q = statistics.quantiles(samples, n=10)  # deciles: q[1] is p20, q[7] is p80
    median = statistics.median(samples)
    return {
        "median_ms": median,
        "p20_ms": q[1],
        "p80_ms": q[7],
        "spread": (q[7] - q[1]) / (2 * median),
        "min_ms": min(samples),
        "reps": len(samples),
    }


def tuning_table(kernels: dict, flops: float) -> list[dict]:
    """What each autotuner measured for every config it benchmarked (its own do_bench, L2 flushed)."""
    rows = []
    for label, kernel in kernels.items():
        for config, (p50, _p20, _p80) in getattr(kernel, "configs_timings", {}).items():
            rows.append(
                {
                    "kernel": label,
                    "config": str(config),
                    "ms": p50,
                    "tflops": flops / p50 / 1e9,
                    "picked": config is kernel.best_config,
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=8192, help="M = N = K")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    parser.add_argument("--reps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument(
        "--extra", type=Path, action="append", default=[], help="another program file (a ModelNew) to time alongside"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("matmul_vs_cublas.py needs a CUDA GPU")
    dtype = getattr(torch, args.dtype)
    naive, tuned, expert = load("naive"), load("tuned"), load("expert")
    models = {
        "naive": naive.ModelNew(),
        "tuned": tuned.ModelNew(),
        "expert_pointer": expert.ModelNew(path="pointer"),
        "expert_tma": expert.ModelNew(path="tma"),
        "expert_auto": expert.ModelNew(),
    }
    for path in args.extra:
        models[path.stem] = load(path.stem, path.resolve()).ModelNew()
    methods = {name: model.forward for name, model in models.items()}
    methods["torch.mm"] = torch.mm
    stamp = {
        "command": "python " + " ".join(sys.argv),
        "device": f"{torch.cuda.get_device_name(0)} (sm_{''.join(map(str, torch.cuda.get_device_capability(0)))}, "
        f"driver {driver_version()})",
        "versions": {
            "torch": torch.__version__,
            "triton": triton.__version__,
            "cuda": torch.version.cuda,
            "python": platform.python_version(),
            "commit": git_commit(),
        },
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
    print(
        f"command: `{stamp['command']}`\ndevice: {stamp['device']}\nversions: {stamp['versions']}\n"
        f"date: {stamp['date']}\n",
        flush=True,
    )

    with torch.no_grad():
        checks = check_shapes({n: f for n, f in methods.items() if n.startswith("expert")}, dtype)
        bad = [r for r in checks if not r["ok"]]
        worst = max(checks, key=lambda r: r["rel_error"])
        shapes = len({r["shape"] for r in checks})
        print(
            f"expert on {shapes} extra shapes: {len(checks) - len(bad)}/{len(checks)} ok; worst {worst['method']} "
            f"{worst['shape']} rel err {worst['rel_error']:.2e}",
            flush=True,
        )
        for r in bad:
            print(f"  FAILED {r['method']} {r['shape']}: rel err {r['rel_error']:.3e}")

        S = args.size
        gen = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(S, S, device="cuda", generator=gen).to(dtype)
        b = torch.randn(S, S, device="cuda", generator=gen).to(dtype)
        ref = torch.mm(a.float(), b.float())
        errors = {name: rel_error(fn(a, b), ref) for name, fn in methods.items()}  # also autotunes every program
        torch.cuda.synchronize()
        del ref
        picked = {"pointer": str(expert.matmul_kernel.best_config), "tma": str(expert.matmul_tma_kernel.best_config)}
        print(f"autotune picked: {picked}", flush=True)

        per_config = tuning_table(
            {
                "tuned": tuned.matmul_kernel,
                "expert pointer": expert.matmul_kernel,
                "expert tma": expert.matmul_tma_kernel,
            },
            2.0 * S**3,
        )
        print("\n| kernel | config | autotuner's ms | TFLOP/s | picked |\n| --- | --- | --- | --- | --- |")
        for r in per_config:
            print(f"| {r['kernel']} | {r['config']} | {r['ms']:.3f} | {r['tflops']:.0f} | {r['picked']} |")
        print(flush=True)

        times = interleaved(methods, a, b, args.reps, args.warmup)
        db = {}
        for name, fn in methods.items():
            if name != "naive":
                p50, p20, p80 = triton.testing.do_bench(
                    lambda fn=fn: fn(a, b), warmup=100, rep=1000, quantiles=(0.5, 0.2, 0.8)
                )
                db[name] = {"median_ms": p50, "spread": (p80 - p20) / (2 * p50)}

    flops = 2.0 * S**3
    stats = {name: summarize(t) for name, t in times.items()}
    mm = stats["torch.mm"]["median_ms"]
    print(f"\n{args.dtype} {S}x{S}x{S}, {args.reps} interleaved repetitions, L2 flushed before every call\n")
    print("| program | median ms (p20-p80 half-width) | TFLOP/s | / torch.mm | do_bench ms (spread) | rel. error |")
    print("| --- | --- | --- | --- | --- | --- |")
    rows = []
    for name, s in stats.items():
        d = db.get(name)
        dcell = f"{d['median_ms']:.3f} (±{d['spread']:.1%})" if d else "-"
        row = {
            "program": name,
            **s,
            "tflops": flops / s["median_ms"] / 1e9,
            "vs_mm": s["median_ms"] / mm,
            "do_bench": d,
            "rel_error": errors[name],
        }
        rows.append(row)
        print(
            f"| {name} | {s['median_ms']:.3f} (±{s['spread']:.1%}) | {row['tflops']:.0f} | {row['vs_mm']:.3f} | "
            f"{dcell} | {errors[name]:.1e} |"
        )
    verdicts = {name: stats[name]["median_ms"] <= 1.10 * mm for name in ("expert_pointer", "expert_tma", "expert_auto")}
    print(f"\nwithin 10% of torch.mm (median <= 1.10 x {mm:.3f} ms): {verdicts}")
    ok = not bad and all(errors[n] <= NORM_TOL[dtype] for n in methods)
    print(f"all outputs correct: {ok}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    **stamp,
                    "dtype": args.dtype,
                    "size": S,
                    "rows": rows,
                    "checks": checks,
                    "autotune": picked,
                    "configs": per_config,
                    "within_10pct": verdicts,
                    "correct": ok,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
