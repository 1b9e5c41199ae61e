"""Variants of the held-out kernels still short of 85% of the roofline, timed side by side with the copy roofline
measured in the same run: what would close each gap, before a transform is written for it.

    python benchmarks/roofline_gaps.py [twins,atomic,rope]

- twins: the naive program, the whole-row twin without `one_load` (run 9's), the current twin, and the twin with its
  warps fixed at 4, 8 and 16 (log-softmax, KL divergence, row argmax, the layer norms);
- atomic: the atomic row sum with other (CHUNK, BLOCK, warps) than the naive 512 / 128 / 4;
- rope: the naive RoPE at 4 and 2 warps, and rows_per_program's generated twin at several BLOCK_ROW and warps.

Each program is checked against the reference on the bench case first (a wrong one is reported, not timed). Medians
of `triton.testing.do_bench` (`return_mode="all"`), with the interquartile range. A report, not a test. Session 8
ran it on an H200 (docs/runs/2026-11-30-h200/session8-explore.log; its RoPE rows were a hand-written twin, the
kernel rows_per_program now writes). Needs a GPU."""

from __future__ import annotations

import datetime
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))
HELD = ROOT / "src" / "klineage" / "suites" / "heldout"
OUT = Path(os.environ.get("OUT", "/tmp")) / "roofline_gaps"
ATOMIC = [(512, 128, 4), (512, 512, 4), (1024, 1024, 4), (2048, 512, 4), (2048, 1024, 4), (4096, 1024, 4),
          (8192, 1024, 4), (16384, 1024, 4), (8192, 2048, 8), (32768, 2048, 8)]  # fmt: skip
ROPE_ROWS = [(2, 2), (4, 2), (4, 4), (8, 4), (16, 4), (32, 4), (32, 8), (64, 8)]


def main() -> None:
    import torch
    import triton
    import whole_row_twins as twins
    from triton.testing import do_bench

    if not torch.cuda.is_available():
        print("no GPU: nothing is timed (this report needs one)")
        return
    OUT.mkdir(parents=True, exist_ok=True)
    which = sys.argv[1].split(",") if len(sys.argv) > 1 else ["twins", "atomic", "rope"]
    print(f"command: `python benchmarks/{Path(__file__).name} {' '.join(sys.argv[1:])}`")
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}, triton {triton.__version__}; "
          f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")  # fmt: skip
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy = 2 * src.numel() / (do_bench(lambda: dst.copy_(src), rep=200, return_mode="median") * 1e-3) / 1e12
    src = dst = None  # free the 2 GiB before the variants
    print(f"device copy: {copy:.2f} TB/s")
    rows = []

    def run(name: str, label: str, text: str) -> None:
        workload = twins._module(HELD / name / "workload.py", f"wl_{name}")
        case = workload.CASES["bench"]
        path = OUT / f"{name}_{re.sub(r'[^A-Za-z0-9]+', '_', label)}.py"
        path.write_text(text)
        try:
            inputs = [t.to("cuda") for t in workload.make_inputs(case, seed=0)]
            expected = workload.Model()(*[t.clone() for t in inputs])
            model = twins._module(path, path.stem).ModelNew()
            got = model(*[t.clone() for t in inputs])
            pairs = zip(got, expected) if isinstance(got, tuple) else [(got, expected)]
            tol = getattr(workload, "TOLERANCES", {}).get(case["dtype"], {})
            ok = all(torch.allclose(g.float(), e.float(), atol=tol.get("atol", 1e-2), rtol=tol.get("rtol", 1e-2))
                     for g, e in pairs)  # fmt: skip
            if not ok:
                rows.append((name, label, "WRONG", 0.0, 0.0, 0.0))
                return
            q = sorted(do_bench(lambda: model(*inputs), rep=100, return_mode="all"))
            med, iqr = q[len(q) // 2], q[3 * len(q) // 4] - q[len(q) // 4]
            rows.append((name, label, "ok", med, iqr, workload.bytes_moved(case) / (med * 1e-3) / 1e12 / copy))
        except Exception as e:  # a variant that does not compile is a finding, not a crash
            rows.append((name, label, f"error {type(e).__name__}: {str(e)[:80]}", 0.0, 0.0, 0.0))
        finally:
            print(rows[-1], flush=True)

    if "twins" in which:
        for name in ["log_softmax", "kl_div", "row_argmax", "layernorm", "residual_layernorm"]:
            variants = twins._variants(name, OUT)
            for label, path in variants.items():
                run(name, label, Path(path).read_text())
            twin = Path(variants["twin"]).read_text()
            for warps in (4, 8, 16):
                run(name, f"twin w{warps}", re.sub(r"row_warps = .*", f"row_warps = {warps}", twin))
    if "atomic" in which:
        base = (HELD / "atomic_rowsum" / "naive.py").read_text()
        for chunk, block, warps in ATOMIC:
            text = base.replace("CHUNK, BLOCK = 512, 128", f"CHUNK, BLOCK = {chunk}, {block}")
            text = text.replace("CHUNK=CHUNK, BLOCK=BLOCK)", f"CHUNK=CHUNK, BLOCK=BLOCK, num_warps={warps})")
            run("atomic_rowsum", f"chunk{chunk} block{block} w{warps}", text)
    if "rope" in which:
        from klineage.transform import load_families

        load_families()
        from klineage.transforms.rows_per_program import RowsPerProgram

        base = (HELD / "rope" / "naive.py").read_text()
        for warps in (4, 2):
            run("rope", f"naive w{warps}", base.replace("BLOCK=triton.next_power_of_2(half),",
                                                         f"BLOCK=triton.next_power_of_2(half), num_warps={warps},"))
        (site,) = [s for s in RowsPerProgram().optimize_sites(base) if s.params.get("kernel")]
        twin = RowsPerProgram().optimize(base, site, {})
        for block_row, warps in ROPE_ROWS:
            run("rope", f"rows R{block_row} w{warps}", twin.replace("BLOCK_ROW=16)", f"BLOCK_ROW={block_row}, "
                                                                    f"num_warps={warps})"))  # fmt: skip
    print()
    print("| instance | variant | status | median ms | IQR ms | roofline |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, label, status, med, iqr, roof in rows:
        print(f"| {name} | {label} | {status} | {med:.4f} | {iqr:.4f} | {roof:.2f} |")


if __name__ == "__main__":
    main()
