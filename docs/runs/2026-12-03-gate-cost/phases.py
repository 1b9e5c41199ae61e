# Scratch driver of docs/BENCHMARKS.md section 3 phase table: run from the tree root with PYTHONPATH=src:. ARGS: [workload] [rounds]
"""Scratch: where a warm CPU correctness check's time goes. Acts as the warm server (imports PRELOAD once), forks a
judge per check that runs correctness_job with perf_counter wrappers around the phases; candidate timings go to fd 2."""
import os, sys, time, collections, tempfile, importlib, re
os.environ["TRITON_INTERPRET"] = "1"
from pathlib import Path
from klineage.sandbox import PRELOAD, _warm_caches
for n in PRELOAD:
    importlib.import_module(n)
_warm_caches()
from klineage.cli import bundled_examples
from klineage.config import Settings
from klineage.gates.common import GateRequest
from klineage.program import load_program
from klineage.workload import load_workload
import klineage.isolation as iso, klineage.gates.candidate as cand, klineage.gates.correctness as corr
import klineage.gates.common as common, klineage.wire as wire

def timed(mod, name, label=None):
    f = getattr(mod, name)
    label = label or name
    def w(*a, **k):
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            os.write(2, f"T {label} {time.perf_counter()-t:.5f}\n".encode())
    setattr(mod, name, w)

for n in ["confine", "_own_group", "_unshare", "_split_for_pid_namespace", "_read_only_outside", "_hide", "_own_proc",
          "_private_dir", "_scrub_environment", "_limits", "_drop_user", "_death_signal", "_checked_paths", "_close_fds",
          "_needed", "make_private_dir", "remove_private_dir"]:
    timed(iso, n, "iso." + n)
timed(cand, "start", "judge.start")
timed(cand, "_serve", "cand._serve(all)")
timed(cand._Served, "_import", "cand.import")
timed(cand._Served, "_init", "cand.init")
timed(cand._Served, "_call", "cand.call")
timed(cand._Served, "_guarded_call", "cand.forward")
timed(cand.Candidate, "request", "judge.request")
timed(cand.Candidate, "close", "judge.close")
timed(corr, "prepare_workload", "judge.prepare_workload")
timed(corr, "_reference", "judge.reference")
timed(corr, "_outputs_finding", "judge.compare")
timed(corr, "make_case_inputs", "judge.make_inputs") if hasattr(corr, "make_case_inputs") else None
import klineage.workload as wlm
timed(wlm, "make_case_inputs", "judge.make_inputs")
timed(wire, "write_frame", "wire.write")
timed(wire, "read_frame", "wire.read")
timed(corr, "_run_trial", "judge.trial")
timed(corr, "domain_case", "judge.domain_case")
for n in ["check_guards", "launch_findings", "_subclass_finding", "pack_values", "unpack_inputs", "_storages", "_plain", "write_frame", "read_frame"]:
    timed(cand, n, "cand." + n)
timed(cand._Served, "_inputs_for", "cand._inputs_for")
timed(cand._Served, "_replay_finding", "cand._replay")
timed(cand._Served, "_evidence", "cand._evidence")
import klineage.guards as guards
timed(guards, "guarded_forward", "cand.guarded_forward(enter)")
timed(corr, "pack_values", "judge.pack_values")
timed(corr, "_runs_back", "judge._runs_back")
timed(corr, "_inputs_back", "judge._inputs_back")
timed(corr, "_mutation_finding", "judge._mutation")
timed(corr, "_disagreement", "judge._disagreement")

only = (sys.argv[1] or None) if len(sys.argv) > 1 else None
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
pairs = [(w, p) for w, p in bundled_examples() if only is None or w.parent.name == only]
home = tempfile.mkdtemp()
settings = Settings(data_dir=Path(home), use_cache=False, warm=True)
for r in range(rounds):
    for wp, pp in pairs:
        req = GateRequest(str(wp), load_program(pp), "cpu", settings, settings.target)
        rd, wr = os.pipe()
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os.setpgid(0, 0)
            os.close(rd)
            os.dup2(wr, 2)
            t = time.perf_counter()
            v = corr.correctness_job(req)
            os.write(2, f"T judge.job {time.perf_counter()-t:.5f}\nV {v.status} {v.code} trials={v.metrics.get('trials')}\n".encode())
            os._exit(0)
        os.close(wr)
        out = b""
        while chunk := os.read(rd, 65536):
            out += chunk
        os.waitpid(pid, 0)
        total = time.perf_counter() - t0
        sums = collections.defaultdict(float); counts = collections.Counter()
        verdict = ""
        for line in out.decode(errors="replace").splitlines():
            if line.startswith("T "):
                _, k, v = line.split(); sums[k] += float(v); counts[k] += 1
            elif line.startswith("V "):
                verdict = line
        [print("   RAW", l) for l in out.decode(errors="replace").splitlines() if "check_guards" in l or "cand.forward" in l]
        print(f"== round {r} {wp.parent.name}/{pp.stem} total {total:.3f} {verdict}")
        if r == rounds - 1 or rounds == 1:
            for k in sums:
                print(f"   {k:32s} {sums[k]:.4f} x{counts[k]}")
