"""The gates on a real GPU: bundled programs pass all three gates with a real profile; every cheat in the
adversarial corpus, the GPU-only ones included (side stream, split-reduction race), fails for its reason."""

import pytest

from klineage.check import check
from klineage.cli import bundled_examples
from klineage.program import load_program
from klineage.sanitize import SANITIZER_ERROR, find_sanitizer, sanitize
from klineage.workload import load_workload
from tests.adversarial.manifest import CASES, CONTROLS, ROOT
from tests.adversarial.runner import first_failure, params, run_case

pytestmark = pytest.mark.gpu


@pytest.fixture
def settings(gpu_home):
    from klineage.config import Settings

    return Settings(data_dir=gpu_home, use_cache=False)


PAIRS = [
    (w, p) for w, p in bundled_examples() if p.stem != "liger" or __import__("importlib").util.find_spec("liger_kernel")
]


@pytest.mark.parametrize("workload, program", PAIRS, ids=[f"{w.parent.name}-{p.stem}" for w, p in PAIRS])
def test_bundled_program_passes_all_gates(workload, program, settings, sandbox):
    report = check(load_workload(workload), load_program(program), settings, "cuda", sandbox=sandbox)
    compile_v, correct_v, profile_v = report.verdicts
    assert compile_v.passed, compile_v.reason
    assert correct_v.passed, f"{correct_v.code}: {correct_v.reason}"
    assert profile_v.passed, profile_v.reason
    m = profile_v.metrics
    assert m["median_ms"] > 0 and m["reps"] >= 30
    assert 0 < m["roofline_fraction"] <= 1.2  # above the measured roofline would mean a broken measurement
    assert profile_v.evidence["ceilings"]["copy_bytes_per_s"] > 1e12


@pytest.mark.parametrize("case", params(CASES, "cuda"))
def test_cheat_fails_on_gpu(case, settings, sandbox):
    if case.gpu_route == "sanitize":  # the step that sees it on a GPU (docs/security.md)
        if find_sanitizer() is None:
            pytest.skip("compute-sanitizer not found")
        verdict = sanitize(ROOT / case.workload, load_program(ROOT / case.program), gpu=True)
        assert (verdict.status, verdict.code) == ("fail", SANITIZER_ERROR), verdict.line()
        return
    verdict = first_failure(run_case(case, settings, "cuda", sandbox))
    assert verdict.status == "fail", f"{case.program} passed on the GPU: {case.why}"
    assert verdict.code in case.expected, f"{case.program}: {verdict.code} ({verdict.reason})"


@pytest.mark.parametrize("program, workload", CONTROLS, ids=[p for p, _ in CONTROLS])
def test_control_passes_on_gpu(program, workload, settings, sandbox):
    report = check(load_workload(ROOT / workload), load_program(ROOT / program), settings, "cuda", sandbox=sandbox)
    assert report.passed, [(v.gate, v.code, v.reason) for v in report.verdicts]


def test_an_autotune_config_the_gpu_cannot_fit_is_passed_over(settings, sandbox):
    """As Triton's autotuner does: the 256x256x128, 4-stage config is out of shared memory on sm_90, so the
    correctness gate runs the other config on every named case and lists the refused one."""
    from tests.conftest import EXAMPLES
    from tests.interpreter.test_device_limits import FITS, TOO_BIG, _matmul_with

    wl = load_workload(EXAMPLES / "matmul" / "workload.py")
    report = check(wl, _matmul_with([TOO_BIG, FITS]), settings, "cuda", ("compile", "correctness"), sandbox)
    compile_v, correct_v = report.verdicts
    assert compile_v.passed, compile_v.reason
    assert correct_v.passed, f"{correct_v.code}: {correct_v.reason}"
    refused = correct_v.evidence["autotune_unrunnable"]["matmul_kernel"]
    assert any("BLOCK_M: 256" in config for config in refused)
    assert all("OutOfResources" in why for why in refused.values())


def _case(name: str):
    return next(c for c in CASES if c.program == f"programs/{name}.py")


def _profile_verdict(report):
    return next(v for v in report.verdicts if v.gate == "profile")


def test_a_patched_clock_run_trusted_disagrees_with_the_judges(settings, sandbox):
    """patch_elapsed_time past the policy (trusted): its kernel is honest, its clock says 1 us a call; the judge's
    own clock over the program's forward back to back says what the device took."""
    report = run_case(_case("patch_elapsed_time"), settings, "cuda", sandbox, trusted=True)
    verdict = _profile_verdict(report)
    assert (verdict.status, verdict.code) == ("fail", "clock_disagrees"), f"{verdict.code}: {verdict.reason}"
    assert verdict.evidence["judge_clock"]["per_call_ms"] >= 0.05


def test_a_program_cheap_only_when_timed_fails_on_its_timed_outputs(settings, sandbox):
    """call_counter is honest for 12 calls (the correctness gate's), zeros after: the judge compares the last timed
    call's outputs with the reference on the input set it makes again."""
    report = run_case(_case("call_counter"), settings, "cuda", sandbox, trusted=True)
    verdict = _profile_verdict(report)
    assert (verdict.status, verdict.code) == ("fail", "timed_mismatch"), f"{verdict.code}: {verdict.reason}"


def test_an_allocation_past_the_candidates_device_memory_cap_is_oom(settings, sandbox):
    """huge_alloc's 64 GiB torch.empty fits in an H200 (139.8 GiB), not under the candidate's cap (0.45: 62.9
    GiB)."""
    verdict = first_failure(run_case(_case("huge_alloc"), settings, "cuda", sandbox, trusted=True))
    assert (verdict.status, verdict.code) == ("fail", "oom"), f"{verdict.code}: {verdict.reason}"
    assert "device" in verdict.reason


def test_an_honest_profile_records_the_judges_clock(settings, sandbox):
    report = check(
        load_workload(ROOT / "workloads/scale_add.py"),
        load_program(ROOT / "controls/scale_add_ok.py"),
        settings,
        "cuda",
        sandbox=sandbox,
    )
    verdict = _profile_verdict(report)
    assert verdict.passed, f"{verdict.code}: {verdict.reason}"
    clock = verdict.evidence["judge_clock"]
    assert clock["calls"] >= 8 and clock["per_call_ms"] > 0
    assert verdict.metrics["judge_per_call_ms"] == clock["per_call_ms"]
    assert "isolation" in verdict.evidence  # the program ran in a confined candidate


MANY_LAUNCHES_WORKLOAD = """
import torch

CASES = {"tiny": {"N": 1024}, "bench": {"N": 4096}}
DOMAIN = {"N": [1, 1 << 20]}


class Model(torch.nn.Module):
    def forward(self, x):
        return x * 12.0


def make_inputs(case, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.rand(case["N"], generator=g)]


def get_inputs():
    return make_inputs(CASES["tiny"], 0)
"""

MANY_LAUNCHES_PROGRAM = """
import torch
import triton
import triton.language as tl


@triton.jit
def _add_into(out_ptr, x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(out_ptr + offs, mask=mask) + tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        out = torch.zeros_like(x)
        n = x.numel()
        for _ in range(12):  # twelve launches of almost nothing: the host's path is the call's time
            _add_into[(triton.cdiv(n, 1024),)](out, x, n, BLOCK=1024)
        return out
"""


def test_a_program_of_many_tiny_launches_passes_on_the_gpus_own_account(settings, sandbox, tmp_path):
    """Twelve launches of a 4096-element add: a few microseconds of device work each behind tens of microseconds of
    host path, the form of a library wrapper (FlagGems's max_dim, RESULTS.md#wild-h100-2). The event timing hides
    the host path behind the L2 flush, the judge's loop does not; NVML's busy share of a second loop says the device
    worked about what the event timing says, and the honest program passes."""
    (tmp_path / "workload.py").write_text(MANY_LAUNCHES_WORKLOAD)
    (tmp_path / "program.py").write_text(MANY_LAUNCHES_PROGRAM)
    workload, program = load_workload(tmp_path / "workload.py"), load_program(tmp_path / "program.py")
    report = check(workload, program, settings, "cuda", sandbox=sandbox)
    verdict = _profile_verdict(report)
    assert verdict.passed, f"{verdict.code}: {verdict.reason}"
    clock = verdict.evidence["judge_clock"]
    if "busy" in clock:  # the judge's first loop disagreed (it does where the host path outlasts a flush)
        assert clock["busy"]["share"] is not None and clock["busy"]["share"] < 0.6, clock["busy"]
        assert verdict.metrics["device_busy_share"] == clock["busy"]["share"]


CACHED_COMPILED_LAUNCH = """
import torch
import triton
import triton.language as tl


@triton.jit
def _scale_add(x_ptr, y_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    tl.store(out_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


_COMPILED = {}  # per size, what the first launch compiled: later calls launch it directly, as FlagGems's libentry


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        n = x.numel()
        grid = (triton.cdiv(n, 256), 1, 1)
        if n not in _COMPILED:
            _COMPILED[n] = _scale_add[grid[:1]](x, y, out, n, BLOCK=256)
        else:
            _COMPILED[n][grid](x, y, out, n, 256)
        return out
"""


def test_a_program_launching_its_cached_compiled_kernel_passes(settings, sandbox, tmp_path):
    # 22 of the first 28 wild starts (FlagGems) failed no_kernel_launch on the H200 before the tracer saw this path
    path = tmp_path / "cached_compiled.py"
    path.write_text(CACHED_COMPILED_LAUNCH)
    workload = load_workload(ROOT / "workloads/scale_add.py")
    report = check(workload, load_program(path), settings, "cuda", sandbox=sandbox)
    correct = next(v for v in report.verdicts if v.gate == "correctness")
    assert correct.passed, f"{correct.code}: {correct.reason}"


LAUNCH_CALLBACKS = [
    "grid_callback_compute",
    "grid_calls_helper",
    "pre_run_hook_compute",
    "heuristic_compute",
    "autotune_hook_compute",
    "launch_hook_compute",
]


@pytest.mark.parametrize("name", LAUNCH_CALLBACKS)
def test_trusted_launch_callback_compute_fails_on_gpu(name, settings, sandbox):
    """Past the policy (a library's program is not scanned), PyTorch compute in a callback Triton calls inside its
    GPU launcher (grid, pre-run hook, launch enter hook) or around it (heuristic, config pre_hook) fails as
    torch_compute: the launch path keeps the ban for program callbacks."""
    verdict = first_failure(run_case(_case(name), settings, "cuda", sandbox, trusted=True))
    assert verdict.code == "torch_compute", f"{verdict.code}: {verdict.reason[:300]}"
