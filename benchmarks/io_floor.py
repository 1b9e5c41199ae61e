"""How far each wild start already is from its memory floor, from a GPU bench's own times, on the CPU.

A method can only speed a program up where there is room. The wild suites' workloads declare no `flops` or
`bytes_moved`, so the bench's roofline column reads n/a for them; this derives both per instance from its PyTorch-op
workload (the `pytorch.py` beside it): the bytes every input set holds (each storage once) plus the bytes of the
op's outputs, and the op's floating-point work by PyTorch's own `FlopCounterMode` (matmuls; elementwise work counts
nothing). Both are run on the CPU at the bench size, so nothing is timed here: the start's time comes from a bench
report (`references[instance].retime.start`, else `.start`), the copy ceiling from a measurement (`--copy-tbps`,
read and write bytes together, as `timing.ceilings` counts them) on the same kind of GPU.

    KLINEAGE_HOME=/tmp/x GEMS_VENDOR=nvidia PYTHONPATH=SITE:src:. python benchmarks/io_floor.py --suite wild \\
        --bench docs/runs/2026-12-06-h100-wild4/bench.json.gz --copy-tbps 3.023 [--tflops 700]

The floor assumes each input byte is read once and each output byte written once: a program that must read an
input twice (a two-pass softmax whose row does not fit) or that reads only part of one (a gather) has another
floor. A start at 0.9 of it has at most about x1.1 left, whatever the method.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import platform
import sys
import tempfile
from pathlib import Path


def load_bench(path: Path) -> dict:
    with (gzip.open if path.suffix == ".gz" else open)(path, "rt") as f:
        return json.load(f)


def start_ms(refs: dict) -> float | None:
    """The start's median as re-timed in a fresh process, else as the references round timed it."""
    for side in (refs.get("retime") or {}, refs):
        ms = (side.get("start") or {}).get("ms")
        if ms:
            return float(ms)
    return None


def case_work(pytorch_workload: Path) -> dict:
    """Bytes in, bytes out and FLOPs of the PyTorch op on its bench case, run on the CPU."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from klineage.compare import flatten_outputs
    from klineage.gates.common import build, input_set
    from klineage.workload import import_file, load_workload, make_case_init_inputs

    workload = load_workload(pytorch_workload)
    module = import_file(pytorch_workload, f"klineage_io_floor_{abs(hash(str(pytorch_workload)))}")
    case = workload.cases[workload.bench_case()]
    inputs = input_set(module, case, 0, "cpu", write_cache=False)
    model = build(module.Model, make_case_init_inputs(module, case))
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        out = model(*inputs)
    seen, nbytes_in = set(), 0
    for x in inputs:
        if torch.is_tensor(x) and x.untyped_storage().data_ptr() not in seen:
            seen.add(x.untyped_storage().data_ptr())
            nbytes_in += x.untyped_storage().nbytes()
    nbytes_out = sum(o.numel() * o.element_size() for o in flatten_outputs(out) if torch.is_tensor(o))
    return {"bytes_in": nbytes_in, "bytes_out": nbytes_out, "flops": counter.get_total_flops()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="wild")
    parser.add_argument("--bench", type=Path, action="append", required=True, help="bench.json[.gz]; repeatable")
    parser.add_argument("--copy-tbps", type=float, required=True, help="measured copy ceiling, TB/s (read+write)")
    parser.add_argument("--tflops", type=float, default=None, help="measured matmul ceiling, TFLOP/s (optional)")
    parser.add_argument("--instances", default="", help="comma-separated (default: every timed one)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    from klineage.bench.suites import suite
    from klineage.config import Settings

    timed, stamps = {}, []
    for path in args.bench:
        report = load_bench(path)
        stamps.append(
            f"{path} ({report['stamp'].get('device')}, {report['stamp'].get('date')}, commit "
            f"{report['stamp'].get('commit')})"
        )
        for name, refs in (report.get("references") or {}).items():
            ms = start_ms(refs)
            if ms:
                timed.setdefault(name, []).append((ms, refs))
    wanted = [n for n in args.instances.split(",") if n] or sorted(timed)
    settings = Settings(data_dir=Path(tempfile.mkdtemp(prefix="klineage-io-floor-")))
    by_name = {i.name: i for i in suite(args.suite, settings)}
    rows = []
    for name in wanted:
        if name not in by_name or name not in timed or not by_name[name].origin.get("pytorch"):
            continue
        try:
            work = case_work(Path(by_name[name].origin["pytorch"]))
        except Exception as e:  # the op on the CPU (a CUDA-only op): said, not fatal
            print(f"{name}: {type(e).__name__}: {str(e)[:160]}", file=sys.stderr)
            continue
        ms, refs = min(timed[name], key=lambda t: t[0])  # the fastest run's start: the floor's fraction errs high
        # PyTorch's own op on the same inputs in the same references round (eager or torch.compile, the faster):
        # what this GPU demonstrably reaches for the op, where the floor is only a bound
        refs_t = {k: (refs.get(k) or {}).get("ms") for k in ("eager", "torch_compile")}
        best = min(((k, v) for k, v in refs_t.items() if v), key=lambda kv: kv[1], default=None)
        if refs.get("eager_of") != "pytorch op":
            best = None  # eager was the start itself (a self-reference without PyTorch's op): no second opinion
        floor_mem = (work["bytes_in"] + work["bytes_out"]) / (args.copy_tbps * 1e12) * 1e3
        floor_flop = work["flops"] / (args.tflops * 1e12) * 1e3 if args.tflops else 0.0
        row = {
            "instance": name,
            **work,
            "start_ms": ms,
            "pytorch_ms": best[1] if best else None,
            "pytorch_of": best[0] if best else None,
            "memory_floor_ms": floor_mem,
            "fraction": max(floor_mem, floor_flop) / ms,
            "bound": "compute" if floor_flop > floor_mem else "memory",
        }
        rows.append(row)
    print(f"command: {' '.join(sys.argv)}")
    print(f"this CPU, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, Python {platform.python_version()}")
    print("times from: " + "; ".join(stamps))
    print(f"ceilings given: copy {args.copy_tbps} TB/s" + (f", matmul {args.tflops} TFLOP/s" if args.tflops else ""))
    print(
        "\n| instance | MB in | MB out | GFLOP | start ms | floor ms | floor / start | PyTorch's best ms "
        "| start / PyTorch's best |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: -r["start_ms"] / (r["pytorch_ms"] or r["start_ms"])):
        best = f"{r['pytorch_ms']:.4f} ({r['pytorch_of']})" if r["pytorch_ms"] else "n/a"
        ratio = f"{r['start_ms'] / r['pytorch_ms']:.2f}" if r["pytorch_ms"] else "n/a"
        print(
            f"| {r['instance']} | {r['bytes_in'] / 1e6:.1f} | {r['bytes_out'] / 1e6:.1f} | {r['flops'] / 1e9:.1f} "
            f"| {r['start_ms']:.4f} | {r['fraction'] * r['start_ms']:.4f} "
            f"| {r['fraction']:.2f}{' (compute)' if r['bound'] == 'compute' else ''} | {best} | {ratio} |"
        )
    if args.json:
        args.json.write_text(json.dumps({"benches": stamps, "copy_tbps": args.copy_tbps, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
