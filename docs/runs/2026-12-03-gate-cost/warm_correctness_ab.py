"""Scratch A/B: warm CPU correctness checks (judge forked from a PRELOADed parent, like the warm server); prints per
check wall seconds. usage: quick.py ONLY ROUNDS"""
import os, sys, time, tempfile, importlib, statistics
os.environ["TRITON_INTERPRET"] = "1"
from pathlib import Path
from klineage.sandbox import PRELOAD, _warm_caches
for n in PRELOAD:
    importlib.import_module(n)
_warm_caches()
if os.environ.get("THREADS1"):
    import torch; torch.set_num_threads(1)
from klineage.cli import bundled_examples
from klineage.config import Settings
from klineage.gates.common import GateRequest
from klineage.program import load_program
import klineage.gates.correctness as corr
only = set((sys.argv[1] or "").split(",")) - {""}
rounds = int(sys.argv[2])
pairs = [(w, p) for w, p in bundled_examples() if not only or w.parent.name in only]
settings = Settings(data_dir=Path(tempfile.mkdtemp()), use_cache=False, warm=True)
times = []
for r in range(rounds):
    for wp, pp in pairs:
        req = GateRequest(str(wp), load_program(pp), "cpu", settings, settings.target)
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os.setpgid(0, 0)
            fd = os.open(os.devnull, os.O_WRONLY); os.dup2(fd, 1); os.dup2(fd, 2)
            v = corr.correctness_job(req)
            os._exit(0 if v.status == "pass" else 3)
        _, st = os.waitpid(pid, 0)
        times.append(time.perf_counter() - t0)
        if os.waitstatus_to_exitcode(st) != 0:
            print("FAILED", wp.parent.name, pp.stem, file=sys.stderr)
print(f"{os.environ.get('LABEL','')} n={len(times)} sum={sum(times):.2f} median={statistics.median(times):.3f} min={min(times):.3f} max={max(times):.3f}")
