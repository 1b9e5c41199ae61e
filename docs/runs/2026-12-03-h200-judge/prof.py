import sys, time, tempfile, os
from pathlib import Path
from klineage.check import check
from klineage.config import Settings
from klineage.program import load_program
from klineage.sandbox import Sandbox
from klineage.workload import load_workload
ex = Path("src/klineage/examples")
pairs = [(ex / "softmax/workload.py", ex / "softmax" / n) for n in ("expert.py", "naive.py")]
with tempfile.TemporaryDirectory() as home, Sandbox(warm=True) as sb:
    s = Settings(data_dir=Path(home), use_cache=False, warm=True)
    for wl, pr in pairs:
        w, p = load_workload(wl), load_program(pr)
        for gates in [("compile",), ("correctness",), ("correctness",), ("profile",), ("profile",)]:
            t0 = time.perf_counter()
            r = check(w, p, s, "cuda", gates, sb)
            v = r.verdicts[0]
            print(f"{sys.argv[1]} {pr.stem} {gates[0]}: {time.perf_counter()-t0:.2f} s {v.status} {v.code} metrics={ {k: v.metrics[k] for k in list(v.metrics)[:4]} }", flush=True)
            if os.environ.get("KL_TRACE"):
                with open(os.environ["KL_TRACE"], "a") as f:
                    f.write(f"--- {pr.stem} {gates[0]} {time.perf_counter()-t0:.2f}\n")
