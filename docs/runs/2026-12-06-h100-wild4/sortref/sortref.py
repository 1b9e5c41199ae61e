"""One-off: gems_sort's start and blind's kept final (num_warps 8 at the sort's second launch), timed by the bench's
references job with and without the eager/torch.compile references, on an idle GPU. Why the 2026-12-06 bench's
references job timed both at 2.6961 ms where the fresh re-time saw x1.015."""
import json, sys, time
from pathlib import Path
from klineage.config import Settings
from klineage.bench.suites import wild_instances
from klineage.bench.references import ReferencesPayload
from klineage.gates import GateRequest
from klineage.proposers.blind import BlindProposer
from klineage.sandbox import GpuTurns, Job, Sandbox
from klineage.suites import wild

device = sys.argv[1] if len(sys.argv) > 1 else "cuda"
settings = Settings.from_env()
kernels = tuple(k for k in wild.catalogue() if k.name == "gems_sort")
(inst,), _ = wild_instances(settings, kernels)
from klineage.workload import load_workload
workload = load_workload(inst.workload)
cands = [c for c in BlindProposer(workload, settings, device).propose(inst.start)
         if c.transform == "launch_knobs" and c.params.get("num_warps") in ("8", 8)]
print([(c.label, c.params) for c in cands])
final = [c for c in cands if c.label.endswith(":304")][0].program
print("start", inst.start.hash, "final", final.hash)
if device != "cuda":
    sys.exit(0)
rows = []
with Sandbox() as sb:
    for programs_only in ((False,) if "--refs" in sys.argv else (False, True)):
        request = GateRequest(str(workload.path), inst.start, device, settings)
        payload = ReferencesPayload(request, (inst.start, final), pytorch_op=inst.origin["pytorch"], programs_only=programs_only)
        t0 = time.time()
        r = sb.run(Job("klineage.bench.references:references_job", payload, timeout_s=600, device=device, turns=GpuTurns.of(settings)))
        v = r.value if r.ok else {"error": r.error[-500:]}
        row = {"programs_only": programs_only, "s": round(time.time() - t0, 1), **{k: v[k] for k in v if k.startswith("program") or k in ("eager", "torch_compile", "error")}}
        print(json.dumps(row), flush=True)
        rows.append(row)
