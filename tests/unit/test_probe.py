"""Probe generation is a pure function of the workload, the predicate, the device and the step: what each predicate
probes on the CPU and on a GPU, and why a predicate is not probed. (The probes' verdicts are tested in
tests/quality/test_probing.py and, on a GPU, tests/gpu/test_probe_gpu.py.)"""

import json
import textwrap

import pytest

from klineage.mine import Lineage, Step
from klineage.probe import OFFSET_LIMIT, PROBE_MAKERS, ablated, autotune_guard, make_probes, overflow_case
from klineage.probing import ProbeResult, classify, in_expert_context
from klineage.program import Program, load_program
from klineage.skills import card, skills_from_lineage
from klineage.transform import CONDITIONS, load_families
from klineage.workload import WorkloadError, load_workload
from tests.conftest import EXAMPLES, FIXTURES

ROWS_MODEL = """
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x * 2


def make_inputs(case, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(case["rows"], case["cols"], generator=g).to(getattr(torch, case["dtype"]))]


def get_init_inputs():
    return []
"""


def write_workload(tmp_path, extra: str, name: str = "rows.py"):
    path = tmp_path / name
    path.write_text(ROWS_MODEL + textwrap.dedent(extra))
    return load_workload(path)


def probes(predicate, workload, device="cpu", **kw):
    return make_probes(predicate, workload, device, **kw)


# --- one maker per predicate ------------------------------------------------------------------------------------------


# Predicates no maker probes, and why: make_probes reports them as not probed (with the workload's own PROBES where it
# declares any).
WITHOUT_MAKER = {
    "fully_masked_rows": "only the workload can make a fully masked row or tile: its own PROBES, not a size change",
    "arch_sm90": "a property of the device, not of an input: conditions.decide reads it off the target or the GPU",
    "tolerance": "every check already compares under the workload's tolerance; no input case violates it",
    "shared_memory_fits": "a property of the compiled kernel: the compile gate checks it on every candidate",
    "loop_index_not_constexpr": "a property of the code, not of an input: the compile gate decides it on any input",
    "flag_not_shape": "a property of the code (the dtype probes exercise its failures): the compile gate decides it",
    "cross_program_handoff": "a property of the code (programs handing partial tiles to each other): no input makes it",
}


def test_every_condition_is_probed_by_a_maker_or_says_why_not(tmp_path):
    assert not set(PROBE_MAKERS) & set(WITHOUT_MAKER)
    assert set(PROBE_MAKERS) | set(WITHOUT_MAKER) == set(CONDITIONS), "give a new predicate a maker or a reason"
    wl = write_workload(tmp_path, 'CASES = {"tiny": {"rows": 4, "cols": 64, "dtype": "float32"}}\n')
    for predicate in PROBE_MAKERS:
        found, why = probes(predicate, wl, "cuda")
        assert (found or why) and all({"name", "case", "layout"} <= set(p) for p in found), predicate
    for predicate in WITHOUT_MAKER:
        found, why = probes(predicate, wl, "cuda")
        assert found == [] and why, predicate


# --- GPU-only predicates and interpreter-blind families ------------------------------------------------------------


@pytest.mark.parametrize("predicate", ["aligned_16", "offsets_below_2_31", "torch_compile_launch"])
def test_gpu_only_predicates_are_not_probed_on_the_cpu(tmp_path, predicate):
    wl = write_workload(tmp_path, 'CASES = {"tiny": {"rows": 4, "cols": 64, "dtype": "float32"}}\n')
    found, why = probes(predicate, wl)
    assert found == [] and why.startswith("not probed on the CPU")


@pytest.mark.parametrize("transform", ["alignment_hints", "assume_hints", "cache_hints", "launch_knobs"])
def test_hint_families_are_left_to_the_gpu(tmp_path, transform):
    """The interpreter ignores hints, so on the CPU their parent and child run identically: a probe there would
    report "not a condition" vacuously. On a GPU the same predicates are probed."""
    wl = write_workload(tmp_path, 'CASES = {"tiny": {"rows": 4, "cols": 64, "dtype": "float32"}}\n')
    for predicate in ("contiguous", "divisible_by_block"):
        found, why = probes(predicate, wl, transform=transform)
        assert found == [] and "a GPU decides it" in why
        on_gpu, _ = probes(predicate, wl, "cuda", transform=transform)
        assert on_gpu
    (misaligned,), _ = probes("aligned_16", wl, "cuda", transform="alignment_hints")
    assert misaligned["layout"] == "misaligned"
    (strided,), _ = probes("contiguous", wl, "cuda", transform="alignment_hints")
    assert strided["layout"] == "strided"


def test_torch_compile_probe_on_the_gpu(tmp_path):
    wl = write_workload(tmp_path, 'CASES = {"tiny": {"rows": 4, "cols": 64, "dtype": "float32"}}\n')
    (probe,), _ = probes("torch_compile_launch", wl, "cuda")
    assert probe["compile"] is True and probe["case"] == wl.cases["tiny"]


# --- sizes, dtypes ------------------------------------------------------------------------------------------------


def test_divisibility_and_dtype_probes(tmp_path):
    wl = write_workload(
        tmp_path,
        """
        CASES = {"tiny": {"rows": 4, "cols": 128, "dtype": "float32"}}
        DOMAIN = {"dtype": ["float32", "float16"]}
    """,
    )
    odd, coarse = probes("divisible_by_block", wl)[0]
    assert odd["case"] == {"rows": 5, "cols": 129, "dtype": "float32"}
    assert coarse["case"] == {"rows": 4, "cols": 144, "dtype": "float32"}
    (half,), _ = probes("dtype_fp16", wl)
    assert half["case"]["dtype"] == "float16" and "heavy-tailed" in half["name"]
    assert probes("dtype_bf16", wl) == ([], "bfloat16 is outside the workload's domain")
    assert probes("dtype_fp32", wl) == ([], "the check cases already run float32")


# --- offsets beyond 2^31 ------------------------------------------------------------------------------------------


def test_overflow_case_scales_the_bench_case_within_the_domain():
    """Cross-entropy: rows <= 65536, vocab <= 262144. The logits grow with both; vocab has more headroom, so it goes
    to its ceiling first, then rows grow just past 2^31 elements; the narrowest dtype the domain admits."""
    wl = load_workload(EXAMPLES / "cross_entropy" / "workload.py")
    case, why = overflow_case(wl)
    assert case == {"rows": 8704, "vocab": 262144, "dtype": "bfloat16", "ignored": 256}
    assert case["rows"] * case["vocab"] > OFFSET_LIMIT and (case["rows"] - 1) * case["vocab"] > OFFSET_LIMIT
    assert "rows=8704, vocab=262144, dtype=bfloat16" in why
    (probe,), _ = probes("offsets_below_2_31", wl, "cuda")
    assert probe["case"] == case and (probe["trials"], probe["runs"], probe["chunk"]) == (1, 1, 2**27)


def test_overflow_case_where_the_domain_forbids_it():
    """The planted workload's domain tops out at 65536 x 16384 = 2^30 elements: int32 offsets hold on all of it."""
    wl = load_workload(FIXTURES / "planted" / "workload.py")
    case, why = overflow_case(wl)
    assert case is None and why.startswith("holds on all of the DOMAIN") and "1,073,741,824" in why
    assert probes("offsets_below_2_31", wl, "cuda") == ([], why)


def test_overflow_case_unbounded_and_listed_values(tmp_path):
    wl = write_workload(
        tmp_path,
        """
        CASES = {"tiny": {"rows": 4, "cols": 16, "dtype": "float32"},
                 "bench": {"rows": 1024, "cols": 1024, "dtype": "float32"}}
        DOMAIN = {"rows": [1, 1048576], "cols": [16, 64, 1024, 4096]}
    """,
    )
    case, _ = overflow_case(wl)
    # rows have the most headroom and go to their ceiling; cols then need 2176, and may only take listed values
    assert case == {"rows": 1048576, "cols": 4096, "dtype": "float16"}
    wl = write_workload(
        tmp_path,
        """
        CASES = {"tiny": {"rows": 4, "cols": 16, "dtype": "float32"},
                 "bench": {"rows": 1024, "cols": 1024, "dtype": "float32"}}
    """,
        "unbounded.py",
    )
    case, _ = overflow_case(wl)  # no DOMAIN: rows grow alone, just past 2^31 elements
    assert case == {"rows": 2228224, "cols": 1024, "dtype": "float16"}


# --- workload probes: fully masked rows ---------------------------------------------------------------------------


def test_fully_masked_rows_needs_the_workload(tmp_path):
    wl = write_workload(tmp_path, 'CASES = {"tiny": {"rows": 4, "cols": 64, "dtype": "float32"}}\n')
    found, why = probes("fully_masked_rows", wl)
    assert found == [] and "PROBES['fully_masked_rows']" in why
    wl = write_workload(
        tmp_path,
        """
        CASES = {"tiny": {"rows": 4, "cols": 64, "dtype": "float32", "empty_rows": 0}}
        PROBES = {"fully_masked_rows": [{"empty_rows": 2}, {"empty_rows": 4}]}
    """,
        "masked.py",
    )
    first, second = probes("fully_masked_rows", wl)[0]
    assert first["case"]["empty_rows"] == 2 and second["case"]["empty_rows"] == 4
    assert first["inputs"] == "fully_masked_rows"  # the gate asks make_probe_inputs first, when there is one


def test_workload_probe_hooks_are_validated(tmp_path):
    with pytest.raises(WorkloadError, match="CLOBBERED_INPUTS"):
        write_workload(
            tmp_path,
            'CASES = {"tiny": {"rows": 1, "cols": 1, "dtype": "float32"}}\n'
            "MUTATED_INPUTS = (0,)\nCLOBBERED_INPUTS = (0,)\n",
        )
    with pytest.raises(WorkloadError, match="PROBES"):
        write_workload(
            tmp_path,
            'CASES = {"tiny": {"rows": 1, "cols": 1, "dtype": "float32"}}\nPROBES = {"fully_masked_rows": 3}\n',
        )


# --- aliasing -----------------------------------------------------------------------------------------------------


def test_aliasing_probe_withdraws_the_permission_to_overwrite(tmp_path):
    clobbering = load_workload(FIXTURES / "probed" / "workload.py")
    (probe,), _ = probes("no_aliasing", clobbering)
    assert probe["keep_inputs"] is True and "reads input 0 again" in probe["name"]
    in_place = load_workload(EXAMPLES / "cross_entropy" / "workload.py")
    found, why = probes("no_aliasing", in_place)
    assert found == [] and "MUTATED_INPUTS" in why
    plain = write_workload(tmp_path, 'CASES = {"tiny": {"rows": 1, "cols": 8, "dtype": "float32"}}\n')
    found, why = probes("no_aliasing", plain)
    assert found == [] and "already requires the inputs back unchanged" in why


# --- idempotence: ablation of autotune's guard ------------------------------------------------------------------


def expert_step(transform: str, function: str) -> tuple[Program, Step]:
    expert = load_program(FIXTURES / "probed" / "expert.py")
    cls = load_families()[transform]
    (site,) = [s for s in cls().sites(expert.source) if s.function == function]
    site_dict = {**site.__dict__, "params": site.params}
    return expert, Step(0, transform, "program", site_dict, expert.hash, "", True, [], {}, 0.0)


def test_autotune_guard_is_removed_for_the_ablation():
    expert, step = expert_step("autotune_single_config", "colsum_kernel")
    source, removed = autotune_guard(expert.source, "colsum_kernel")
    assert removed == 'reset_to_zero=["s_ptr"]' and 'reset_to_zero=["s_ptr"])' not in source
    assert 'key=["n_cols"])' in source  # the rest of the decorator is kept
    assert autotune_guard(source, "colsum_kernel") is None  # nothing left to remove
    assert autotune_guard(expert.source, "masked_rms_kernel") is None  # not autotuned
    (probe,), _ = probes(
        "idempotent_launch",
        load_workload(FIXTURES / "probed" / "workload.py"),
        transform=step.transform,
        parent=expert,
        step=step,
    )
    assert probe["ablation"] == {
        "kind": "autotune_guard",
        "module": "program",
        "kernel": "colsum_kernel",
        "removed": 'reset_to_zero=["s_ptr"]',
    }
    variant = ablated(expert, probe["ablation"])
    assert variant.source == source and variant.hash != expert.hash


def test_idempotence_without_a_guard_is_a_plain_repeated_launch(tmp_path):
    wl = write_workload(tmp_path, 'CASES = {"tiny": {"rows": 1, "cols": 8, "dtype": "float32"}}\n')
    (probe,), _ = probes("idempotent_launch", wl)
    assert "ablation" not in probe and probe["name"].startswith("repeated launches")


def test_in_expert_context_undoes_only_this_step():
    expert, step = expert_step("inplace_aliasing", "forward")
    alone = in_expert_context(expert, step)
    assert "y = torch.empty_like(x)" in alone.source and "reset_to_zero" in alone.source


# --- verdicts and skills ------------------------------------------------------------------------------------------


def verdict(status, code=""):
    return {"status": status, "code": code, "reason": "why"}


def test_classify():
    assert classify(verdict("fail", "mismatch"), verdict("pass"))[0] == "condition"
    assert classify(verdict("pass"), verdict("fail", "crash"))[0] == "required"
    assert classify(verdict("pass"), verdict("pass"))[0] == "not_a_condition"
    assert classify(verdict("fail", "mismatch"), verdict("fail", "mismatch"))[0] == "outside_domain"
    # a harness error or an out-of-memory says nothing about the programs
    assert classify(verdict("error", "error"), verdict("pass"))[0] == "not_probed"
    status, why = classify(verdict("pass"), verdict("fail", "oom"))
    assert status == "not_probed" and "simple form" in why


def test_a_required_counterexample_is_a_failure_the_optimization_avoids():
    step = Step(
        0,
        "int64_offsets",
        "program",
        {
            "function": "k",
            "line": 1,
            "before": "a",
            "after": "b",
            "index": 0,
            "transform": "int64_offsets",
            "params": {},
        },
        "p",
        "c",
        True,
        [],
        {"measured": False, "why": "cpu"},
        0.0,
    )
    lineage = Lineage("lin", "w", "wh", "e", "eh", "cpu", {}, [step], True)
    probe = {"name": "largest tensor past 2^31 elements", "case": {}, "layout": None}
    result = ProbeResult("offsets_below_2_31", "required", probe, verdict("pass"), verdict("fail", "crash"))
    probed = {0: [result.as_condition() | {"parent": result.parent, "child": result.child}]}
    (skill,) = skills_from_lineage(lineage, probed)
    (failure,) = skill.failures
    assert failure["breaks"] == "simple" and failure["code"] == "crash" and failure["case"] == probe["name"]
    assert "breaks the simple form" in card(skill)


def test_probes_on_another_kind_of_device_are_kept_apart(tmp_path):
    """A walk made on the CPU and probed on a GPU keeps both answers: the GPU does not reuse the CPU's."""
    from klineage.mine import Lineage
    from klineage.probing import probes_path

    cpu_walk = Lineage("id", "w", "wh", "e", "eh", "cpu-interpreter-x86_64", {})
    gpu_walk = Lineage("id", "w", "wh", "e", "eh", "NVIDIA H200", {})
    assert probes_path(tmp_path, cpu_walk, "cpu") == tmp_path / "probes.json"
    assert probes_path(tmp_path, cpu_walk, "cuda") == tmp_path / "probes-cuda.json"
    assert probes_path(tmp_path, gpu_walk, "cuda") == tmp_path / "probes.json"
    assert probes_path(tmp_path, gpu_walk, "cpu") == tmp_path / "probes-cpu.json"


def test_a_probes_file_is_written_whole_and_a_cut_one_reads_as_unprobed(tmp_path):
    from klineage.probing import read_probes, write_probes

    path = tmp_path / "probes.json"
    assert read_probes(path) == {}
    probes = {10: [{"predicate": "idempotent_launch", "status": "counterexample"}], 2: []}
    write_probes(path, probes)
    assert read_probes(path) == probes and list(tmp_path.iterdir()) == [path]
    assert list(json.loads(path.read_text())) == ["2", "10"]  # in step order, keys as the file always had them
    path.write_text('{"2": [], "10": [{"predicate": "idem')  # what a kill in the middle of a plain write left
    assert read_probes(path) == {}  # its steps are probed again, where json.loads raised before
