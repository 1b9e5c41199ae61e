"""The bundled attention example: the naive and the expert forward pass compile (sm_90) and correctness on the CPU,
the expert compiles to tensor-core and TMA instructions without spills, and mining the expert walks back at least
four verified steps, down to one masked loop over every key block (its mask-free TMA stage undone). The
causal loop bound the walk undoes is redone on the naive kernel, and a bound cut one block short fails; so is the
host-folded base-2 scale, which keeps the naive kernel correct."""

import pytest

from klineage.check import check
from klineage.config import Settings
from klineage.mine import LineageStore, mine
from klineage.program import Program, load_program
from klineage.transforms.causal_bound import CausalBound
from klineage.transforms.exp2_folded_scale import Exp2FoldedScale
from klineage.transforms.masked_stage_split import MaskedStageSplit
from klineage.workload import load_workload
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.interpreter

ATTENTION = EXAMPLES / "attention"


@pytest.mark.parametrize("program", ["naive", "expert"])
def test_attention_programs_pass_compile_and_correctness(program, settings, sandbox):
    workload = load_workload(ATTENTION / "workload.py")
    report = check(
        workload, load_program(ATTENTION / f"{program}.py"), settings, "cpu", ("compile", "correctness"), sandbox
    )
    compile_v, correct_v = report.verdicts
    assert compile_v.passed, compile_v.reason
    assert correct_v.passed, f"{correct_v.code}: {correct_v.reason}"
    assert correct_v.metrics["trials"] >= len(workload.check_cases("cpu")) + 3
    assert compile_v.metrics["tensor_core_instructions"] > 0
    if program == "expert":
        # every autotune config for the bench case plus the tiny cases' tile, none spilling, K/V through TMA
        assert compile_v.metrics["specializations"] >= 4 + 3
        assert compile_v.metrics["spill_bytes"] == 0
        assert compile_v.metrics["tma_instructions"] > 0
        assert compile_v.metrics["max_shared_bytes"] <= 227 * 1024  # what one sm_90 block may use


def test_expert_mines_at_least_four_steps_down_to_one_masked_loop(tmp_path, sandbox):
    workload = load_workload(ATTENTION / "workload.py")
    expert = load_program(ATTENTION / "expert.py")
    settings = Settings(data_dir=tmp_path, seeds=3)
    lineage = mine(workload, expert, settings, "cpu", sandbox)
    accepted = {s.transform for s in lineage.accepted}
    assert len(lineage.accepted) >= 4, [(s.transform, s.verdicts) for s in lineage.steps]
    assert {
        "pipelining",
        "divisibility_fast_path",
        "alignment_hints",
        "causal_bound",
        "exp2_folded_scale",
        "masked_stage_split",
    } <= accepted
    # P rounded to V's dtype is what lets the 128 x 128 tile at 3 stages fit: raising V to fp32 instead needs more
    # shared memory than an sm_90 block has, so the step is refused at compile and kept as a guard
    (operand,) = [s for s in lineage.steps if s.transform == "dot_operand_dtype"]
    assert not operand.accepted and "shared memory" in operand.verdicts[0]["reason"]
    simplest = LineageStore(tmp_path / "lineages" / lineage.id).load_program(lineage.simplest, expert.name).source
    undone_forms = (
        "if EVEN:",
        "tl.range(mid",
        "tl.multiple_of(start_n",
        ".to(tl.int64)",
        "tl.minimum(q_start",
        "tl.exp2(",
        "LOG2E / math.sqrt(D)",
    )
    for undone in undone_forms:
        assert undone not in simplest
    # the mask-free TMA stage is gone; the masked stage, from the first key block, does all of the work
    assert "desc_k.load(" not in simplest and "for start_n in range(0, hi, BLOCK_N):" in simplest
    assert 'tl.where(keep, tl.dot(q, tl.trans(k)), float("-inf"))' in simplest


@pytest.mark.parametrize("diagonal, passes", [("pid_m * BLOCK_M + BLOCK_M", True), ("pid_m * BLOCK_M", False)])
def test_naive_attention_with_the_causal_bound(diagonal, passes, settings, sandbox):
    """The cut at the first row past the query block keeps every key a row may see; one block short drops the
    diagonal block, and the correctness gate says so."""
    workload = load_workload(ATTENTION / "workload.py")
    naive = load_program(ATTENTION / "naive.py")
    transform = CausalBound()
    (site,) = transform.optimize_sites(naive.source)
    source = transform.optimize(naive.source, site, {"order": "end_first", "diagonal": diagonal})
    assert f"tl.minimum(seq_len, {diagonal}) if CAUSAL else seq_len" in source
    program = Program(name="naive_cut", source=source, path=None)
    report = check(workload, program, settings, "cpu", ("compile", "correctness"), sandbox)
    assert report.verdict("correctness").passed is passes, report.verdict("correctness").reason


def test_naive_attention_with_the_folded_base2_scale(settings, sandbox):
    """log2(e) folded into the host's scale and tl.exp2 in the kernel: every value the scale reaches is in log2
    units, the softmax is the same, and the correctness gate passes it (causal and non-causal tiny cases)."""
    workload = load_workload(ATTENTION / "workload.py")
    naive = load_program(ATTENTION / "naive.py")
    transform = Exp2FoldedScale()
    (site,) = transform.optimize_sites(naive.source)
    source = transform.optimize(naive.source, site, {"form": "div", "constant": "LOG2E"})
    assert "1.4426950408889634 / D**0.5" in source and "tl.exp(" not in source
    report = check(
        workload,
        Program(name="naive_exp2", source=source, path=None),
        settings,
        "cpu",
        ("compile", "correctness"),
        sandbox,
    )
    assert report.verdict("correctness").passed, report.verdict("correctness").reason


@pytest.mark.parametrize("past", [False, True])
def test_naive_attention_with_the_mask_free_stage(past, settings, sandbox):
    """The causal cut, then the mask-free stage over the key blocks left of the diagonal block: correct. The split
    point moved one block past the diagonal leaves that block's causal mask out, and the correctness gate fails it."""
    workload = load_workload(ATTENTION / "workload.py")
    source = load_program(ATTENTION / "naive.py").source
    cut = CausalBound()
    source = cut.optimize(source, cut.optimize_sites(source)[0], {"order": "diagonal_first"})
    split = MaskedStageSplit()
    (site,) = split.optimize_sites(source)
    source = split.optimize(source, site, {})
    causal = "(pid_m * BLOCK_M) // BLOCK_N * BLOCK_N"
    assert causal in source
    if past:
        source = source.replace(causal, f"{causal} + BLOCK_N", 1)
    report = check(
        workload,
        Program(name="naive_split", source=source, path=None),
        settings,
        "cpu",
        ("compile", "correctness"),
        sandbox,
    )
    assert report.verdict("correctness").passed is not past, report.verdict("correctness").reason
