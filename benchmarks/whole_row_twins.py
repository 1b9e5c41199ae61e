"""Time the whole-row twins against their naive row kernels, side by side in one process: the held-out naive program,
its twin without `one_load` (what RESULTS.md#run-9 measured), and its twin as `whole_row_tile` writes it now.

    python benchmarks/whole_row_twins.py [--case bench] [--reps 50] [--instances layernorm,log_softmax,...]

Each program is checked against the workload's reference on the case first (a wrong one is reported, not timed).
Times are medians of CUDA-event timings of one call (triton.testing.do_bench, `return_mode="median"`), with the
interquartile range; the roofline fraction divides the workload's `bytes_moved` by a device-to-device copy's
bandwidth measured in the same run. A report, not a test: nothing is asserted. Without a GPU it says so and times
nothing (set TRITON_INTERPRET=1 with `--case tiny` to check the programs on the CPU)."""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
HELDOUT = ROOT / "src" / "klineage" / "suites" / "heldout"
DEFAULT = "layernorm,residual_layernorm,log_softmax,kl_div,rmsnorm_fp16,row_argmax"


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _variants(name: str, out: Path) -> dict[str, Path]:
    """naive / twin without one_load / twin, written under `out`."""
    import klineage.transforms.whole_row_tile as w
    from klineage.transform import load_families

    load_families()
    source = (HELDOUT / name / "naive.py").read_text()
    transform = w.WholeRowTile()
    (site,) = [s for s in transform.optimize_sites(source) if s.params["width"] == "n_cols"][:1]
    paths = {"naive": HELDOUT / name / "naive.py"}
    keep = w.one_load
    try:
        w.one_load = lambda statements: statements
        (out / f"{name}_twin_run9.py").write_text(transform.optimize(source, site, {}))
    finally:
        w.one_load = keep
    (out / f"{name}_twin.py").write_text(transform.optimize(source, site, {}))
    paths["twin, run 9"] = out / f"{name}_twin_run9.py"
    paths["twin"] = out / f"{name}_twin.py"
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="bench")
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--instances", default=DEFAULT)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp")) / "whole_row_twins")
    args = parser.parse_args()
    import torch
    import triton

    args.out.mkdir(parents=True, exist_ok=True)
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    print(f"command: `python benchmarks/{Path(__file__).name} {' '.join(sys.argv[1:])}`")
    print(
        f"device: {torch.cuda.get_device_name() if cuda else 'cpu (no GPU: nothing is timed)'}; torch "
        f"{torch.__version__}, triton {triton.__version__}; {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC"
    )
    copy_tbs = None
    if cuda:
        from triton.testing import do_bench

        src = torch.empty(1 << 30, dtype=torch.uint8, device=device)
        dst = torch.empty_like(src)
        ms = do_bench(lambda: dst.copy_(src), rep=200, return_mode="median")
        copy_tbs = 2 * src.numel() / (ms * 1e-3) / 1e12
        print(f"device copy: {copy_tbs:.2f} TB/s (1 GiB read + 1 GiB written, median)")
        del src, dst
    print()
    print("| instance | program | correct | median ms | IQR ms | x naive | roofline |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in args.instances.split(","):
        workload = _module(HELDOUT / name / "workload.py", f"wl_{name}")
        case = workload.CASES[args.case]
        inputs = [t.to(device) if hasattr(t, "to") else t for t in workload.make_inputs(case, seed=0)]
        init = workload.get_init_inputs()
        with torch.no_grad():
            expected = workload.Model(*init).to(device)(*[t.clone() if hasattr(t, "clone") else t for t in inputs])
        tolerance = getattr(workload, "TOLERANCES", {}).get(case["dtype"], {"atol": 1e-2, "rtol": 1e-2})
        tolerance = {k: v for k, v in tolerance.items() if k in ("atol", "rtol")}  # a sanity check, not the gate
        naive_ms = None
        for label, path in _variants(name, args.out).items():
            model = _module(path, f"{name}_{label.replace(' ', '_').replace(',', '')}").ModelNew(*init)
            got = model(*[t.clone() if hasattr(t, "clone") else t for t in inputs])
            pairs = zip(got, expected) if isinstance(got, tuple) else [(got, expected)]
            ok = all(torch.allclose(g.float(), e.float(), **tolerance) for g, e in pairs)
            if not cuda or not ok:
                print(f"| {name} | {label} | {'yes' if ok else 'NO'} | not timed | | | |")
                continue
            from triton.testing import do_bench

            q = do_bench(lambda m=model, x=inputs: m(*x), rep=args.reps * 2, return_mode="all")
            q = sorted(q)
            med, iqr = q[len(q) // 2], q[3 * len(q) // 4] - q[len(q) // 4]
            naive_ms = naive_ms or med
            roof = workload.bytes_moved(case) / (med * 1e-3) / 1e12 / copy_tbs
            print(f"| {name} | {label} | yes | {med:.4f} | {iqr:.4f} | x{naive_ms / med:.3f} | {roof:.2f} |")


if __name__ == "__main__":
    main()
