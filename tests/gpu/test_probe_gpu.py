"""Condition probing on a real GPU: what the CPU leaves to it. A contiguity hint that a strided input falsifies,
int32 offsets past 2^31 elements (tests/fixtures/hinted), the autotune trap on the first launch, and a forward
compiled by torch.compile (tests/fixtures/probed)."""

import json

import pytest

from klineage.config import Settings
from klineage.gates import GateRequest, run_gate
from klineage.mine import mine
from klineage.probing import probe_lineage
from klineage.program import load_program
from klineage.skills import skills_from_lineage
from klineage.workload import load_workload
from tests.conftest import FIXTURES

pytestmark = pytest.mark.gpu


def mined(name, gpu_home, sandbox):
    settings = Settings(data_dir=gpu_home / name, seeds=2, use_cache=False)
    workload = load_workload(FIXTURES / name / "workload.py")
    lineage = mine(workload, load_program(FIXTURES / name / "expert.py"), settings, "cuda", sandbox)
    probes = probe_lineage(lineage, workload, settings, "cuda", sandbox)
    return lineage, skills_from_lineage(lineage, probes)


def condition(skills, transform, predicate):
    (skill,) = [s for s in skills if s.transform["id"] == transform]
    (found,) = [c for c in skill.conditions if c["predicate"] == predicate]
    return skill, found


@pytest.fixture(scope="module")
def hinted(gpu_home, sandbox):
    return mined("hinted", gpu_home, sandbox)


@pytest.fixture(scope="module")
def probed(gpu_home, sandbox):
    return mined("probed", gpu_home, sandbox)


def test_contiguity_hint_breaks_on_a_strided_input(hinted):
    lineage, skills = hinted
    assert [s.transform for s in lineage.accepted] == ["alignment_hints", "int64_offsets"]
    skill, contiguous = condition(skills, "alignment_hints", "contiguous")
    assert contiguous["status"] == "condition", contiguous
    (failure,) = [f for f in skill.failures if f["violated"] == "contiguous"]
    # the hinted vector loads read the strided buffer's gaps, which the harness poisons (guards.POISON_BYTE): the
    # wrong values arrive as NaN, so the gate says nan_mismatch (H200, 2026-12-03; this test expected the plain
    # mismatch of an unpoisoned gap and had failed since the gaps were poisoned)
    assert failure["breaks"] == "optimized" and failure["code"] in ("mismatch", "nan_mismatch"), failure


def test_int32_offsets_break_past_2_31_elements(hinted):
    _, skills = hinted
    skill, offsets = condition(skills, "int64_offsets", "offsets_below_2_31")
    assert offsets["status"] == "required", offsets
    assert offsets["probe"]["case"]["n"] > 2**31
    (failure,) = skill.failures
    wrapped = ("crash", "forward_error", "mismatch", "out_of_bounds_write", "nan_mismatch", "unwritten_output")
    assert failure["breaks"] == "simple" and failure["code"] in wrapped, failure


def test_probed_conditions_hold_on_the_gpu(probed):
    """The autotune trap is a first-launch failure on the GPU (the benchmark runs each config many times)."""
    _, skills = probed
    assert condition(skills, "autotune_single_config", "idempotent_launch")[1]["status"] == "condition"
    assert condition(skills, "inplace_aliasing", "no_aliasing")[1]["status"] == "condition"
    assert condition(skills, "work_skipping", "fully_masked_rows")[1]["status"] == "required"


def test_torch_compile_probe_runs_the_forward_compiled(gpu_home, sandbox):
    settings = Settings(data_dir=gpu_home / "compile", seeds=2, use_cache=False)
    workload = load_workload(FIXTURES / "hinted" / "workload.py")
    probe = {"name": "compiled", "case": workload.cases["tiny"], "layout": None, "compile": True}
    request = GateRequest(
        str(workload.path), load_program(FIXTURES / "hinted" / "expert.py"), "cuda", settings, probe=probe
    )
    verdict = run_gate("correctness", request, sandbox)
    assert verdict.passed, (verdict.code, verdict.reason, verdict.evidence.get("log", "")[-1500:])


def test_retime_takes_each_accepted_steps_time_again_on_the_gpu(hinted, gpu_home, sandbox):
    from klineage.mine import retime

    lineage, _ = hinted
    settings = Settings(data_dir=gpu_home / "hinted", seeds=2, use_cache=False)
    again = retime(lineage, load_workload(FIXTURES / "hinted" / "workload.py"), settings, "cuda", sandbox)
    for before, after in zip(lineage.accepted, again.accepted):
        assert after.effect["measured"] and after.effect["speedup"] > 0
        assert after.effect["earlier"]["parent_ms"] == before.effect["parent_ms"]


def test_a_walk_made_on_the_cpu_is_timed_and_probed_on_the_gpu(gpu_home, sandbox):
    """`klineage mine --walk-device cpu --device cuda`: the planted expert walked through the interpreter, read back
    as recorded, every accepted step timed on the GPU and probed there; the skills' effects are keyed by the GPU
    that timed them, and the GPU's probes are kept beside the CPU's: the CPU's answers taken, the predicates the
    interpreter left open probed on the GPU."""
    import torch

    from klineage.mine import recorded_walk, retime

    settings = Settings(data_dir=gpu_home / "walked-on-cpu", seeds=2, use_cache=False)
    workload = load_workload(FIXTURES / "planted" / "workload.py")
    expert = load_program(FIXTURES / "planted" / "expert.py")
    walked = mine(workload, expert, settings, "cpu", sandbox)
    probe_lineage(walked, workload, settings, "cpu", sandbox)
    assert walked.accepted and not any(s.effect["measured"] for s in walked.accepted)
    timed = retime(recorded_walk(workload, expert, settings, "cpu"), workload, settings, "cuda", sandbox)
    probes = probe_lineage(timed, workload, settings, "cuda", sandbox)
    folder = settings.data_dir / "lineages" / walked.id
    assert (folder / "probes.json").is_file() and (folder / "probes-cuda.json").is_file()
    assert set(probes) == {s.index for s in walked.accepted}
    # the CPU's answers are taken, marked; what the interpreter could not decide was probed on the GPU
    cpu = {int(k): {c["predicate"]: c for c in v} for k, v in json.loads((folder / "probes.json").read_text()).items()}
    for index, conditions in probes.items():
        for c in conditions:
            was = cpu[index][c["predicate"]]
            assert ("where the walk ran" in c["evidence"]) == (was["status"] != "not_probed")
            assert was["status"] == "not_probed" or c["status"] == was["status"]
    skills = [s for s in skills_from_lineage(timed, probes) if s.kind == "optimization"]
    gpu = torch.cuda.get_device_name(0)
    assert len(skills) == len(walked.accepted)
    for skill in skills:
        assert list(skill.effect) == [gpu] and skill.effect[gpu]["measured"] and skill.effect[gpu]["parent_ms"] > 0
        assert skill.provenance["device"].startswith("cpu-interpreter")
