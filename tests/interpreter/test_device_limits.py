"""What the device refuses, judged as the GPU would: a config that does not fit is one Triton's autotuner passes
over (so the gates pass over it too), and a launch that cannot fit at all fails. On the CPU the compile gate emulates
the loader's shared-memory check for the target; the correctness gate's autotune trials skip a config the device
refused (on the CPU, a config pre_hook raising OutOfResources stands in for the loader)."""

import pytest

from klineage.check import check
from klineage.program import Program
from klineage.workload import load_workload
from tests.adversarial.manifest import ROOT
from tests.conftest import EXAMPLES
from tests.optimize.skillmaker import FixedProposer

pytestmark = pytest.mark.interpreter

MATMUL = EXAMPLES / "matmul"
# 4 stages of a 256x128 A tile and a 128x256 B tile in bf16: 512 KiB of shared memory, where sm_90 allows 227 KiB
TOO_BIG = (
    'triton.Config({"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128, "GROUP_SIZE_M": 8}, num_stages=4, num_warps=8)'
)
FITS = 'triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_SIZE_M": 8}, num_stages=3, num_warps=4)'


def _matmul_with(configs: list[str]) -> Program:
    """The tuned matmul with its autotune list replaced by `configs`."""
    source = (MATMUL / "tuned.py").read_text()
    start = source.index("    return [\n", source.index("def _configs():")) + len("    return [\n")
    end = source.index("\n    ]\n", start)
    listed = "\n".join(f"        {c}," for c in configs)
    return Program("matmul-configs", source[:start] + listed + source[end:])


def test_a_launch_that_cannot_fit_fails_the_compile_gate_without_a_gpu(settings, sandbox):
    wl = load_workload(MATMUL / "workload.py")
    verdict = check(wl, _matmul_with([TOO_BIG]), settings, "cpu", ("compile",), sandbox).verdicts[0]
    assert verdict.status == "fail" and verdict.code == "compile_error"
    assert "shared memory" in verdict.reason and "232448" in verdict.reason and "sm_90" in verdict.reason


def test_an_autotune_config_that_cannot_fit_is_passed_over_as_on_the_gpu(settings, sandbox):
    wl = load_workload(MATMUL / "workload.py")
    verdict = check(wl, _matmul_with([TOO_BIG, FITS]), settings, "cpu", ("compile",), sandbox).verdicts[0]
    assert verdict.passed, verdict.reason
    assert verdict.metrics["max_shared_bytes"] <= 232448  # only what would run is summarized
    over = verdict.evidence["over_shared_memory"]
    assert over and all("warps=8 stages=4" in s and int(s.split(": ")[-1].split()[0]) > 232448 for s in over)
    assert all(k["shared_bytes"] <= 232448 for k in verdict.evidence["specializations"])
    assert any("warps=4 stages=3" in k["specialization"] for k in verdict.evidence["specializations"])
    # the same list on a target with less shared memory (sm_89: 99 KiB) still has a config that fits
    small = check(wl, _matmul_with([TOO_BIG, FITS]), settings.replace(target="sm_89"), "cpu", ("compile",), sandbox)
    assert small.verdicts[0].passed, small.verdicts[0].reason


REFUSED = """
from triton.runtime.errors import OutOfResources


def _refused(nargs):  # stands in for the GPU's loader refusing this config (the interpreter never runs out)
    raise OutOfResources(294944, 232448, "shared memory")
"""


def _softmax_with_refused(which: list[int]) -> Program:
    source = (ROOT / "controls/softmax_autotuned_ok.py").read_text()
    configs = [
        'triton.Config({"BLOCK": 64}, num_warps=1',
        'triton.Config({"BLOCK": 256}, num_warps=4',
        'triton.Config({"BLOCK": 32}, num_warps=2',
    ]
    for k in which:
        assert configs[k] in source
        source = source.replace(configs[k] + ")", configs[k] + ", pre_hook=_refused)")
    source = source.replace("\n\n@triton.autotune", REFUSED + "\n\n@triton.autotune", 1)
    return Program("softmax-refused", source)


def test_the_correctness_gate_skips_an_autotune_config_the_device_refuses(settings, sandbox):
    wl = load_workload(ROOT / "workloads/softmax.py")
    verdict = check(wl, _softmax_with_refused([0]), settings, "cpu", ("correctness",), sandbox).verdicts[0]
    assert verdict.passed, f"{verdict.code}: {verdict.reason}"
    refused = verdict.evidence["autotune_unrunnable"]["_softmax_kernel"]
    assert len(refused) == 1 and "BLOCK: 64" in next(iter(refused))
    assert "OutOfResources" in next(iter(refused.values()))
    assert verdict.metrics["autotune_configs"] == 2  # the two the device runs, each on every named case
    tuned = [t for t in verdict.evidence["trials"] if "autotune config" in t]
    assert sorted(tuned) == [f"case {case}, seed 0, normal inputs, autotune config 2" for case in ("tiny", "wide")]


def test_an_autotuner_with_no_config_the_device_runs_fails(settings, sandbox):
    wl = load_workload(ROOT / "workloads/softmax.py")
    verdict = check(wl, _softmax_with_refused([0, 1, 2]), settings, "cpu", ("correctness",), sandbox).verdicts[0]
    assert verdict.status == "fail"
    assert "OutOfResources" in verdict.reason or "shared memory" in verdict.reason


class _Deciding(FixedProposer):
    """A proposer that decides its candidates' conditions (as KLineage's does), offering the programs it is given."""

    decides_conditions = True  # Proposer.refuse_candidate records the refusal


def test_a_candidate_that_cannot_load_is_refused_without_spending_an_evaluation(settings, sandbox):
    """The attention expert's first tile, 128x128 at 3 stages, carried onto the naive attention needs 262144 bytes
    of shared memory on sm_90 (232448 there): a method that decides its conditions refuses it, naming
    shared_memory_fits, and gates the next (128x64 fits) with the evaluation it kept."""
    from klineage.optimize import optimize, seconds_line

    folder = EXAMPLES / "attention"
    wl, naive = load_workload(folder / "workload.py"), (folder / "naive.py").read_text()

    def tiled(m, n, warps, stages):
        source = naive.replace("BLOCK_M = BLOCK_N = 32", f"BLOCK_M, BLOCK_N = {m}, {n}").replace(
            "num_warps=4, num_stages=1", f"num_warps={warps}, num_stages={stages}"
        )
        assert source != naive
        return Program(f"{m}x{n}", source)

    start = Program("naive", naive)
    proposer = _Deciding("klineage", [tiled(128, 128, 8, 3), tiled(128, 64, 8, 3)])
    t = optimize(wl, start, proposer, settings, "cpu", budget=2, sandbox=sandbox, explore=True)
    assert [a.candidate.label for a in t.attempts] == ["variant 1"] and t.evaluations == 2
    (refused,) = t.refusals
    assert refused.predicate == "shared_memory_fits" and refused.reason.startswith("variant 0: ")
    assert "262144" in refused.reason and "232448" in refused.reason
    assert t.phases["refused_checks_s"] > 0 and "checking candidates refused for shared memory" in seconds_line(t)


def _shared_memory_guard():
    """The guard the attention walk writes when P's cast for P @ V cannot be undone at the expert's tile."""
    import dataclasses

    from tests.optimize.skillmaker import make_skill

    base = make_skill("dot_operand_dtype", {"operand": 0, "cast": "other"})
    detail = (
        "case bench: OutOfResources: out of resource: shared memory, Required: 263184, Hardware limit: "
        "232448. Reducing block sizes or `num_stages` may help. (the sm_90 limit)"
    )
    return dataclasses.replace(
        base,
        id="guard.dot_operand_dtype.attention.expert.s7",
        kind="guard",
        failures=[
            {
                "violated": "removal of the construct",
                "gate": "compile",
                "code": "compile_error",
                "detail": detail,
                "case": "the workload's check cases",
            }
        ],
    )


class _GuardedTiles:
    """KLineage's proposer with one guard skill, listing the given tiled programs as its candidates."""

    def __new__(cls, workload, settings, programs, guards):
        from klineage.proposers import Candidate, SkillProposer

        class Listing(SkillProposer):
            def propose(self, program):
                return [
                    Candidate(
                        p.name, "tiles.test.s0", "autotune_single_config", "program", "forward", {}, 1.0, "", (), p
                    )
                    for p in programs
                    if p.hash != program.hash
                ]

        return Listing(workload, settings, "cpu", guards)


def test_a_tile_refused_for_shared_memory_is_tried_with_a_guard_that_saves_it(settings, sandbox):
    """The expert's 128x128 tile on the naive attention is refused (262144 bytes, 232448 fit); KLineage then gates
    the same tile with the construct of a guard whose removal failed for shared memory in its expert (P rounded to
    V's dtype for P @ V: 229376 bytes), with the evaluation the refusal kept. A guard of another failure, or the
    rewritten candidate refused again, is not rewritten."""
    import dataclasses

    from klineage.optimize import optimize

    folder = EXAMPLES / "attention"
    wl, naive = load_workload(folder / "workload.py"), (folder / "naive.py").read_text()
    tiled = Program(
        "128x128",
        naive.replace("BLOCK_M = BLOCK_N = 32", "BLOCK_M, BLOCK_N = 128, 128").replace(
            "num_warps=4, num_stages=1", "num_warps=8, num_stages=3"
        ),
    )
    guard = _shared_memory_guard()
    proposer = _GuardedTiles(wl, settings, [tiled], [guard])
    t = optimize(wl, Program("naive", naive), proposer, settings, "cpu", budget=2, sandbox=sandbox, explore=True)
    (refused,) = t.refusals
    assert refused.predicate == "shared_memory_fits" and "262144" in refused.reason
    (attempt,) = t.attempts
    assert attempt.candidate.origin == guard.id and attempt.candidate.transform == "dot_operand_dtype"
    assert attempt.kept and attempt.verdicts[0]["status"] == "pass"  # compile: it fits now
    assert "tl.dot(p.to(v.dtype), v)" in attempt.candidate.program.source and "128, 128" in t.best.source
    assert "shared_memory_fits: refused, then " + guard.id in attempt.candidate.decided_by
    # no second rewrite of the rewritten candidate, no rewrite for another refusal or another guard's failure
    assert proposer.after_refusal(attempt.candidate, "shared_memory_fits") is None
    assert proposer.after_refusal(attempt.candidate, "divisible_by_block") is None
    other = dataclasses.replace(guard, failures=[{**guard.failures[0], "gate": "correctness", "detail": "mismatch"}])
    assert _GuardedTiles(wl, settings, [tiled], [other]).shared_memory_guards == []
