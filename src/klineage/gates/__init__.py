"""The three gates: compile, correctness, profile. Each returns a `Verdict` value and never raises.

The `*_job` functions (gates.compile, gates.correctness, gates.profile) run inside a sandbox child, the judge (see
sandbox.py), which runs the program only in a confined candidate process it forks (gates.candidate) and builds the
verdict from what comes back, with the setup they share in gates.common; this module is the caller's side:
`run_gate` builds the job, runs it in the sandbox and turns a crash, hang or out-of-memory into a failing verdict."""

from __future__ import annotations

from klineage.gates.common import GateRequest, Verdict, memory_finding_in
from klineage.sandbox import GpuTurns, Job, Sandbox, SandboxResult

GATES = ("compile", "correctness", "profile")

JOBS = {
    "compile": "klineage.gates.compile:compile_job",
    "correctness": "klineage.gates.correctness:correctness_job",
    "profile": "klineage.gates.profile:profile_job",
}


def run_gate(gate: str, request: GateRequest, sandbox: Sandbox, alone: bool = False) -> Verdict:
    """Run one gate in the sandbox; a crash, timeout or OOM of the child is a failing verdict, never an exception.
    `alone`: the job holds its GPU alone for its whole run, not side by side with other jobs' checks."""
    if gate == "profile" and request.device != "cuda":
        return Verdict(
            "profile",
            "skip",
            "no_gpu",
            "no GPU: no time was taken; the compile gate's static metrics are all there is",
        )
    env = {"TRITON_INTERPRET": "1"} if gate == "correctness" and request.device == "cpu" else {}
    job = Job(
        JOBS[gate],
        request,
        env=env,
        timeout_s=request.settings.timeout_s,
        device=request.device,
        gpu_alone=alone,
        turns=GpuTurns.of(request.settings),
    )
    result = sandbox.run(job)
    return verdict_from_result(gate, result)


def verdict_from_result(gate: str, result: SandboxResult) -> Verdict:
    if result.ok and isinstance(result.value, Verdict):
        value = result.value
        evidence = dict(value.evidence)
        if value.status != "pass" and result.log:
            evidence["log"] = result.log[-2000:]
        return Verdict(
            value.gate, value.status, value.code, value.reason, value.metrics, evidence, value.seconds or result.seconds
        )
    code = {"timeout": "timeout", "oom": "oom", "crash": "crash"}.get(result.kind, "error")
    status = "fail" if code in ("timeout", "oom", "crash") else "error"
    reason = result.error
    found = memory_finding_in(result.error) if result.kind == "exception" else None
    if found is not None:  # the allocator's RuntimeError from the program's constructor: the program's, not ours
        status, code, reason = "fail", found.code, found.detail
    if "illegal memory access" in result.log or "misaligned address" in result.log:
        code, reason = "crash", f"{reason}: illegal memory access"
    return Verdict(gate, status, code, reason, evidence={"log": result.log[-2000:]}, seconds=result.seconds)


__all__ = ["GATES", "JOBS", "GateRequest", "Verdict", "run_gate", "verdict_from_result"]
