"""Re-time one catalog rewrite of a bench instance against its start, outside the tool.

A gain the bench keeps is timed inside KLineage's gates (a candidate process, the judge's clock checks); this times
the same two programs in one plain process with `triton.testing.do_bench`, rounds interleaved, after checking that
the rewrite's outputs equal the start's on the bench case. The rewrite is the one a method without evidence applies:
the family's default parameters at the site (`proposers.base.catalog_candidates`), written at run time from the
installed package's source (nothing of it is kept here).

    PYTHONPATH=SITE:src:. python3 benchmarks/retime_rewrite.py --suite wild-quant \
        --instance ao_triton_fp8_rowwise_3d_transpose_rhs_fused_reduction --transform pipelining [--site 0] \
        [--params '{"num_stages": "2"}'] [--rounds 5] [--json OUT]

`--site` picks which of the family's sites (in the order `catalog_candidates` lists them; `--list` prints them).
Without a GPU (`--device cpu`: Triton's interpreter, as the gates' CPU path) it checks the outputs on the
workload's seed case and times nothing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import sys
import tempfile
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="wild-quant")
    parser.add_argument("--instance", required=True)
    parser.add_argument("--transform", required=True, help="a transform id (a family), e.g. pipelining")
    parser.add_argument("--site", type=int, default=0)
    parser.add_argument("--list", action="store_true", help="list the family's sites on the start and stop")
    parser.add_argument("--params", default=None, help="the rewrite's parameters as JSON (default: the family's)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    if args.device == "cpu":  # the interpreter, its fixes and CUDA host code mapped to the CPU, as the gates run it
        import os

        os.environ["TRITON_INTERPRET"] = "1"
        from klineage.cuda_on_cpu import install as map_cuda_to_cpu
        from klineage.interp import patch_interpreter

        patch_interpreter()
        map_cuda_to_cpu()
    import torch
    import triton

    from klineage.bench.suites import suite
    from klineage.compare import flatten_outputs
    from klineage.config import Settings
    from klineage.gates.common import build, input_set, rotating
    from klineage.program import install
    from klineage.proposers.base import catalog_candidates, families
    from klineage.workload import import_file, load_workload, make_case_init_inputs

    settings = Settings(data_dir=Path(tempfile.mkdtemp(prefix="klineage-retime-")))
    found = [i for i in suite(args.suite, settings) if i.name == args.instance]
    if not found:
        print(f"retime_rewrite: no instance {args.instance} in suite {args.suite}", file=sys.stderr)
        return 2
    instance = found[0]
    transform = families().get(args.transform)
    if transform is None:
        print(f"retime_rewrite: no transform {args.transform}", file=sys.stderr)
        return 2
    params = json.loads(args.params) if args.params else None
    candidates = list(catalog_candidates(instance.start, [transform], params=params))
    if args.list or not candidates:
        for i, c in enumerate(candidates):
            print(f"{i}: {c.label} {c.params}")
        if not candidates:
            print(f"retime_rewrite: {args.transform} has no site in {args.instance}", file=sys.stderr)
        return 0 if candidates else 2
    candidate = candidates[args.site]
    rewritten = candidate.program
    if rewritten is None:
        print(f"retime_rewrite: {candidate.label} did not apply", file=sys.stderr)
        return 2

    workload = load_workload(instance.workload)
    wl_module = import_file(Path(instance.workload), "klineage_retime_workload")
    case_name = workload.bench_case() if args.device == "cuda" else workload.seed_case("cpu")
    case = workload.cases[case_name]
    init = make_case_init_inputs(wl_module, case)
    models = {}
    for name, program in (("start", instance.start), (candidate.label, rewritten)):
        module = install(program)  # the second copy's modules replace the first's imports; the first's stay bound
        models[name] = build(module.ModelNew, init).to(args.device)
    sets = [input_set(wl_module, case, seed, args.device) for seed in range(2)]

    def call(model, inputs):
        with torch.no_grad():
            return model(*inputs)

    outs = {name: call(m, sets[0]) for name, m in models.items()}
    flat = {name: [o for o in flatten_outputs(out) if torch.is_tensor(o)] for name, out in outs.items()}
    start_out, new_out = flat["start"], flat[candidate.label]
    equal = len(start_out) == len(new_out) and all(torch.equal(a, b) for a, b in zip(start_out, new_out))
    if not equal and len(start_out) == len(new_out):
        for a, b in zip(start_out, new_out):
            print(
                f"  differs: max |a - b| = {(a.double() - b.double()).abs().max().item():.3g}"
                if a.shape == b.shape
                else "  shapes differ"
            )
    stamp = (
        f"device: {torch.cuda.get_device_name() if args.device == 'cuda' else 'cpu (interpreter)'}; "
        f"torch {torch.__version__}, Triton {triton.__version__}, Python {platform.python_version()}; "
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC"
    )
    print(f"command: {' '.join(sys.argv)}")
    print(stamp)
    print(
        f"{args.instance}, case {case_name}: {candidate.label} {candidate.params}; "
        f"outputs equal to the start's: {equal}"
    )
    if args.device != "cuda":
        print("no GPU: nothing timed")
        return 0 if equal else 1

    from triton.testing import do_bench

    calls = {name: rotating(model, sets) for name, model in models.items()}  # input sets in turn: not one in cache
    rows = {name: [] for name in models}
    for _ in range(args.rounds):  # interleaved: drift lands on both alike
        for name, fn in calls.items():
            rows[name].append(do_bench(fn, warmup=25, rep=100))
    start_ms = statistics.median(rows["start"])
    print(f"do_bench(warmup=25, rep=100) x {args.rounds} interleaved rounds: median [min, max]")
    print("\n| program | ms | vs start |\n|---|---|---|")
    for name, ms in rows.items():
        med = statistics.median(ms)
        print(f"| {name} | {med:.4f} [{min(ms):.4f}, {max(ms):.4f}] | x{start_ms / med:.3f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"stamp": stamp, "equal": equal, "case": case_name, "ms": rows}, f, indent=1)
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
