"""What Triton's interpreter spent on integer overflow checks that do nothing (interp._patch_dead_overflow_checks):
each kernel call timed in a fresh process with the checks as Triton 3.6 ships them (`sanitize_overflow` on, its
`device_assert` a no-op without `debug`) and with them off, side by side, alternating, median of the repeats.

    PYTHONPATH=src:. [GEMS_VENDOR=nvidia PYTHONPATH=src:.:SITE] python benchmarks/interp_overflow.py [--repeats 3]

The bundled examples' programs on their "tiny" case; FlagGems's ops (where flag_gems imports) on small inputs."""

from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "src/klineage/examples"
BUNDLED = [
    ("rmsnorm", "naive"),
    ("rmsnorm", "liger"),
    ("softmax", "naive"),
    ("softmax", "expert"),
    ("matmul", "naive"),
    ("attention", "naive"),
    ("cross_entropy", "liger"),
]
GEMS = [
    ("sort", "torch.randn(16, 64)"),
    ("topk", "torch.randn(16, 128)"),
    ("cumsum", "torch.randn(64, 128)"),
    ("var", "torch.randn(64, 128)"),
    ("avg_pool2d", "torch.randn(2, 4, 16, 16)"),
]
GEMS_CALLS = {  # module of flag_gems.ops: (function, its arguments after the input)
    "sort": ("sort", (-1,)),
    "topk": ("topk", (8, -1)),
    "cumsum": ("cumsum", (1,)),
    "var": ("var", ([1],)),
    "avg_pool2d": ("avg_pool2d", ([2, 2],)),
}
CALLS = 5  # calls timed together: a bundled program's tiny case takes milliseconds


def child(spec: str, checks: bool) -> float:
    """One call's mean seconds over CALLS calls, after a first that warms the imports, in this process."""
    os.environ["TRITON_INTERPRET"] = "1"
    from klineage import cuda_on_cpu, interp

    interp.patch_interpreter()
    if checks:  # as Triton ships it
        import dataclasses

        import triton.runtime.interpreter as interpreter

        builder = interpreter.interpreter_builder
        builder.options = dataclasses.replace(builder.options, sanitize_overflow=True)
    cuda_on_cpu.install()
    import torch

    kind, name, variant = spec.split(":")
    if kind == "bundled":
        spec_w = importlib.util.spec_from_file_location("w", EXAMPLES / name / "workload.py")
        workload = importlib.util.module_from_spec(spec_w)
        spec_w.loader.exec_module(workload)
        spec_p = importlib.util.spec_from_file_location("p", EXAMPLES / name / f"{variant}.py")
        program = importlib.util.module_from_spec(spec_p)
        spec_p.loader.exec_module(program)
        inputs = workload.make_inputs(workload.CASES["tiny"], 0)
        model = program.ModelNew(*getattr(workload, "get_init_inputs", lambda: [])())

        def call():
            model(*inputs)
    else:
        function, rest = GEMS_CALLS[name]
        fn = getattr(importlib.import_module(f"flag_gems.ops.{name}"), function)
        x = eval(variant, {"torch": torch})  # noqa: S307 (this file's own literals)

        def call():
            fn(x, *rest)

    call()
    began = time.perf_counter()
    for _ in range(CALLS):
        call()
    return (time.perf_counter() - began) / CALLS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", default="")
    parser.add_argument("--checks", action="store_true")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.checks)))
        return
    specs = [f"bundled:{n}:{v}" for n, v in BUNDLED]
    if importlib.util.find_spec("flag_gems") is not None:  # without importing it: FlagGems asks for a GPU
        specs += [f"gems:{n}:{x}" for n, x in GEMS]
    import torch
    import triton

    print(f"$ {' '.join(sys.argv)}")
    print(
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, CPU (Triton's interpreter), "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, torch {torch.__version__}, "
        f"Triton {triton.__version__}; seconds a call (mean of {CALLS}), "
        f"median of {args.repeats} fresh processes an arm"
    )
    print("| kernel | checks on (as shipped) | checks off (klineage) | ratio (spread on / off) |")
    print("| --- | --- | --- | --- |")
    for spec in specs:
        times = {True: [], False: []}
        for _ in range(args.repeats):
            for checks in (True, False):  # alternating, so drift in the machine's load hits both arms
                cmd = [sys.executable, __file__, "--child", spec] + (["--checks"] if checks else [])
                out = subprocess.run(cmd, capture_output=True, text=True, env=os.environ, check=False)
                if out.returncode != 0:
                    times[checks].append(float("nan"))
                    print(f"# {spec} failed: {out.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
                    continue
                times[checks].append(json.loads(out.stdout.strip().splitlines()[-1]))
        on, off = statistics.median(times[True]), statistics.median(times[False])
        lo_on, hi_on, lo_off, hi_off = min(times[True]), max(times[True]), min(times[False]), max(times[False])
        spread = f"{lo_on:.3f}-{hi_on:.3f} / {lo_off:.3f}-{hi_off:.3f}"
        _, name, variant = spec.split(":")
        label = name if spec.startswith("gems") else f"{name} {variant}"
        print(f"| {label} | {on:.3f} | {off:.3f} | x{on / off:.2f} ({spread}) |", flush=True)


if __name__ == "__main__":
    main()
