"""Every bundled program passes the compile and correctness gates on the CPU, and an installed package's kernels
can be replaced by rewritten copies without touching site-packages (proved on Liger-Kernel's RMSNorm)."""

import hashlib
import importlib.util
from pathlib import Path

import pytest

from klineage.check import check
from klineage.cli import bundled_examples
from klineage.program import Program, load_program
from klineage.workload import load_workload
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.interpreter

HAS_LIGER = importlib.util.find_spec("liger_kernel") is not None
PAIRS = [(wl, prog) for wl, prog in bundled_examples() if HAS_LIGER or prog.stem != "liger"]


@pytest.mark.sweep(case="rmsnorm-naive")  # the demo's program stands for the sweep below --tier all
@pytest.mark.parametrize("workload, program", PAIRS, ids=[f"{w.parent.name}-{p.stem}" for w, p in PAIRS])
def test_bundled_program_passes(workload, program, settings, sandbox):
    report = check(load_workload(workload), load_program(program), settings, "cpu", sandbox=sandbox)
    compile_v, correct_v, profile_v = report.verdicts
    assert compile_v.passed, compile_v.reason
    assert correct_v.passed, f"{correct_v.code}: {correct_v.reason}"
    assert profile_v.status == "skip" and profile_v.code == "no_gpu"  # no time invented without a GPU
    assert not any("ms" in k for k in profile_v.metrics)
    assert profile_v.metrics["static_max_registers"] == compile_v.metrics["max_registers"]
    assert compile_v.metrics["specializations"] >= 1 and compile_v.metrics["max_registers"] > 0
    assert correct_v.metrics["trials"] >= 3 + len(load_workload(workload).check_cases("cpu"))


def test_tuned_matmul_compiles_every_autotune_config_with_tensor_cores(settings, sandbox):
    wl = load_workload(EXAMPLES / "matmul" / "workload.py")
    report = check(wl, load_program(EXAMPLES / "matmul" / "tuned.py"), settings, "cpu", ("compile",), sandbox)
    verdict = report.verdicts[0]
    assert verdict.passed
    assert verdict.metrics["specializations"] >= 6  # all pruned configs, for each case's specialization
    assert verdict.metrics["tensor_core_instructions"] > 0  # wgmma/mma on sm_90


def test_verdicts_are_cached(settings, sandbox):
    wl = load_workload(EXAMPLES / "softmax" / "workload.py")
    prog = load_program(EXAMPLES / "softmax" / "naive.py")
    first = check(wl, prog, settings, "cpu", ("correctness",), sandbox)
    second = check(wl, prog, settings, "cpu", ("correctness",), sandbox)
    assert first.cached == (False,) and second.cached == (True,)
    assert second.verdicts[0] == first.verdicts[0]
    other_target = check(wl, prog, settings.replace(target="sm_80"), "cpu", ("compile",), sandbox)
    assert other_target.cached == (False,) and other_target.verdicts[0].passed


def _liger_rms_norm_source() -> tuple[Path, str]:
    path = Path(importlib.util.find_spec("liger_kernel.ops.rms_norm").origin)
    return path, path.read_text()


@pytest.mark.skipif(not HAS_LIGER, reason="needs the experts extra (liger-kernel)")
def test_rewritten_liger_module_replaces_the_installed_one(settings, sandbox):
    installed, source = _liger_rms_norm_source()
    before = hashlib.sha256(installed.read_bytes()).hexdigest()
    wl = load_workload(EXAMPLES / "rmsnorm" / "workload.py")
    base = load_program(EXAMPLES / "rmsnorm" / "liger.py")
    # an unchanged copy behaves like the original
    same = Program("liger-copy", base.source, {"liger_kernel.ops.rms_norm": source})
    assert check(wl, same, settings, "cpu", ("correctness",), sandbox).passed
    # a rewritten copy is what runs: break the forward kernel's store and the gate must see it
    marker = "    tl.store(y_base + col_offsets, Y_row, mask=mask)"
    assert marker in source
    broken = source.replace(marker, "    tl.store(y_base + col_offsets, Y_row * 2, mask=mask)", 1)
    rewritten = Program("liger-rewritten", base.source, {"liger_kernel.ops.rms_norm": broken})
    verdict = check(wl, rewritten, settings, "cpu", ("correctness",), sandbox).verdicts[0]
    assert verdict.code == "mismatch"
    assert hashlib.sha256(installed.read_bytes()).hexdigest() == before  # site-packages untouched


@pytest.mark.sweep
@pytest.mark.parametrize("target", ["sm_80", "sm_89", "sm_90", "sm_100"])
def test_compile_for_every_target_without_a_gpu(target, settings, sandbox):
    from tests.conftest import FIXTURES

    wl = load_workload(FIXTURES / "scale_add.py")
    report = check(
        wl, load_program(FIXTURES / "scale_add_ok.py"), settings.replace(target=target), "cpu", ("compile",), sandbox
    )
    verdict = report.verdicts[0]
    assert verdict.passed, verdict.reason
    assert verdict.evidence["target"] == target
    assert verdict.metrics["max_load_bits"] >= 32 and verdict.metrics["max_registers"] > 0


SOFTMAX_EXPERT = EXAMPLES / "softmax" / "expert.py"
SOFTMAX_CAP = "MAX_FUSED_SIZE = 32768"


def _kernel_names(verdict) -> set[str]:
    return {k.rsplit(".", 1)[-1] for k in verdict.evidence["kernels"]}


def _softmax_workload(tmp_path, tiny: str, odd: str):
    """The softmax workload with its tiny and odd cases replaced (the gate checks both against torch.softmax)."""
    text = (EXAMPLES / "softmax" / "workload.py").read_text()
    patched = text.replace('"tiny": {"M": 6, "N": 37, "dtype": "float32"}', tiny)
    patched = patched.replace('"odd": {"M": 19, "N": 1000, "dtype": "float16"}', odd)
    assert patched.count(tiny) == 1 and patched.count(odd) == 1
    path = tmp_path / "workload.py"
    path.write_text(patched)
    return load_workload(path)


def test_softmax_expert_takes_the_one_tile_kernel_on_the_workload(settings, sandbox):
    wl = load_workload(EXAMPLES / "softmax" / "workload.py")
    correct_v = check(wl, load_program(SOFTMAX_EXPERT), settings, "cpu", ("correctness",), sandbox).verdicts[0]
    assert correct_v.passed, f"{correct_v.code}: {correct_v.reason}"
    assert set(wl.check_cases("cpu")) == {"tiny", "odd"}
    assert _kernel_names(correct_v) == {"softmax_one_tile"}


@pytest.mark.parametrize("block", [4096, 64], ids=["block4096", "block64"])
def test_softmax_expert_looped_kernel(block, settings, sandbox, tmp_path):
    # MAX_FUSED_SIZE patched to 16 sends 5x300 fp32 and 3x37 fp16 rows to the looped kernel. With its BLOCK of
    # 4096 every row is narrower than one tile, so most lanes never see a value (m stays -inf): the NaN guard.
    # With BLOCK 64 the 300-wide rows span five tiles (the last partial), so the running rescale is exercised.
    source = load_program(SOFTMAX_EXPERT).source
    assert source.count(SOFTMAX_CAP) == 1 and source.count("BLOCK=4096") == 1
    source = source.replace(SOFTMAX_CAP, "MAX_FUSED_SIZE = 16").replace("BLOCK=4096", f"BLOCK={block}")
    wl = _softmax_workload(
        tmp_path, '"tiny": {"M": 5, "N": 300, "dtype": "float32"}', '"odd": {"M": 3, "N": 37, "dtype": "float16"}'
    )
    report = check(
        wl, Program(f"softmax-expert-looped-{block}", source), settings, "cpu", ("compile", "correctness"), sandbox
    )
    compile_v, correct_v = report.verdicts
    assert compile_v.passed, compile_v.reason  # the looped kernel compiles for sm_90 too
    assert correct_v.passed, f"{correct_v.code}: {correct_v.reason}"
    assert _kernel_names(correct_v) == {"softmax_looped"}


def test_the_compile_gate_reports_what_it_did_before_the_split(settings, sandbox):
    """The compile gate runs the program in a confined candidate now (gates.compile.target_task) and the judge
    builds the verdict from its report: the same specializations as the gate in one process gave at 16a4300 (sm_90,
    this Triton), the worst-case metrics the sum of them, and the isolation line in the evidence."""
    from klineage.gates.compile import _summarize

    wl = load_workload(EXAMPLES / "softmax" / "workload.py")
    verdict = check(wl, load_program(EXAMPLES / "softmax" / "naive.py"), settings, "cpu", ("compile",), sandbox)
    verdict = verdict.verdicts[0]
    assert verdict.passed, f"{verdict.code}: {verdict.reason}"
    specs = verdict.evidence["specializations"]
    assert sorted((s["name"], s["specialization"]) for s in specs) == [
        ("softmax_kernel", "[1024] warps=4 stages=3"),
        ("softmax_kernel", "[64] warps=4 stages=3"),
        ("softmax_kernel", "[8192] warps=4 stages=3"),
    ]
    assert verdict.metrics == _summarize(specs) and verdict.evidence["target"] == "sm_90"
    assert verdict.evidence["isolation"].startswith("isolation:")
