"""An existing kernel as its own reference: an inputs file plus the original program make the workload, and a
candidate must match the original's outputs. Proven on our naive RMSNorm and on Liger-Kernel's installed RMSNorm
(someone else's kernel), whose rewritten copy serves the candidate while the installed one serves the reference."""

import importlib.util
import json

import pytest
from click.testing import CliRunner

from klineage.check import check
from klineage.cli import main
from klineage.gates.correctness import CHECK_PHASES
from klineage.library import Library
from klineage.program import Program, load_program
from klineage.reference import self_reference_workload
from klineage.workload import WorkloadError, load_workload
from tests.conftest import EXAMPLES
from tests.optimize.skillmaker import make_skill

pytestmark = pytest.mark.interpreter
RMS = EXAMPLES / "rmsnorm"


def test_the_original_passes_against_itself_and_a_changed_one_does_not(settings, sandbox):
    original = load_program(RMS / "naive.py")
    wl = load_workload(self_reference_workload(RMS / "workload.py", original, settings.data_dir))
    assert check(wl, original, settings, "cpu", ("correctness",), sandbox).passed
    marker = "y.to(y_ptr.dtype.element_ty)"
    assert marker in original.source
    wrong = Program("wrong", original.source.replace(marker, "(y * 1.01).to(y_ptr.dtype.element_ty)"))
    verdict = check(wl, wrong, settings, "cpu", ("correctness",), sandbox).verdicts[0]
    assert verdict.status == "fail" and verdict.code == "mismatch"


def test_a_config_bug_is_found_against_an_autotuned_original(settings, sandbox):
    """The autotune passes compare each further config with the original's answer for the same inputs, asked of its
    reference process once (gates.correctness._reference_for): the 64-wide tile's wide rows still fail."""
    from tests.adversarial.manifest import ROOT

    original = load_program(ROOT / "controls" / "softmax_autotuned_ok.py")
    wl = load_workload(self_reference_workload(ROOT / "workloads" / "softmax.py", original, settings.data_dir))
    honest = check(wl, original, settings, "cpu", ("correctness",), sandbox).verdicts[0]
    assert honest.passed, honest.reason
    assert sum("autotune config" in t for t in honest.evidence["trials"]) == 4  # 2 more configs x tiny, wide
    # the original's process started beside the candidate's: its wait after the candidate's hello is recorded
    phases = honest.evidence["phase_seconds"]
    assert set(phases) == set(CHECK_PHASES) and phases["reference_start"] >= 0 and phases["candidate_start"] > 0
    partial = load_program(ROOT / "programs" / "autotune_partial_tile.py")
    verdict = check(wl, partial, settings, "cpu", ("correctness",), sandbox).verdicts[0]
    assert verdict.status == "fail" and verdict.code in ("unwritten_output", "mismatch"), verdict.reason
    assert "BLOCK: 64" in verdict.evidence["autotune_configs"]["_softmax_kernel"]
    assert len(verdict.evidence["trial_seconds"]) == verdict.metrics["trials_passed"] + 1  # the failing one too


def test_inputs_file_without_inputs_is_a_one_line_error(settings, tmp_path):
    empty = tmp_path / "inputs.py"
    empty.write_text("X = 1\n")
    with pytest.raises(WorkloadError, match="make_inputs"):
        self_reference_workload(empty, load_program(RMS / "naive.py"), settings.data_dir)
    with pytest.raises(WorkloadError, match="single file"):
        self_reference_workload(RMS / "workload.py", Program("p", "class ModelNew: pass"), settings.data_dir)


@pytest.mark.skipif(importlib.util.find_spec("liger_kernel") is None, reason="needs the experts extra")
def test_optimizing_liger_rmsnorm_against_the_installed_original(tmp_path):
    with Library(tmp_path / "lib") as lib:
        lib.save(make_skill("cache_hints", {"eviction_policy": '"evict_first"'}, ("contiguous",)))
    result = CliRunner().invoke(
        main,
        [
            "optimize",
            str(RMS / "workload.py"),
            str(RMS / "liger.py"),
            "--self-reference",
            "--module",
            "liger_kernel.ops.rms_norm",
            "--library",
            str(tmp_path / "lib"),
            "--budget",
            "2",
            "--device",
            "cpu",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    (attempt,) = data["attempts"]
    assert attempt["kept"] and attempt["candidate"]["module"] == "liger_kernel.ops.rms_norm"
    assert "backward" not in attempt["candidate"]["function"]  # only kernels the forward workload runs


RELU = """import torch
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
"""


def test_the_documented_command_with_an_inputs_file_of_just_get_inputs(tmp_path, monkeypatch):
    """`klineage optimize INPUTS PROGRAM --self-reference` as docs/cli.md shows it: an inputs file with only
    get_inputs() over module-level sizes (no Model, no get_init_inputs), the default library of the data directory,
    the derived small case said at once (issue 31)."""
    monkeypatch.setenv("KLINEAGE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KLINEAGE_PROGRESS_LINES", "1")
    with Library(tmp_path / "home" / "library") as lib:
        lib.save(make_skill("cache_hints", {"eviction_policy": '"evict_first"'}, ("contiguous",)))
    inputs, program = tmp_path / "inputs.py", tmp_path / "relu.py"
    inputs.write_text(
        "import torch\n\nrows = 256\ncols = 1000\n\n\ndef get_inputs():\n    return [torch.randn(rows, cols)]\n"
    )
    program.write_text(RELU)
    args = ["optimize", str(inputs), str(program), "--self-reference", "--device", "cpu", "--budget", "2"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].endswith("optimizing relu on cpu (klineage, budget 2)")
    assert "case tiny, derived from the full-size get_inputs(): rows=" in lines[1] and "(full 1000)" in lines[1]
    assert any("checking the start program relu on cpu (evaluation 1 of 2): correctness gate" in x for x in lines)
