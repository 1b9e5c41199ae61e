"""CUDA host code checked on the CPU unchanged (klineage.cuda_on_cpu), and Python's `and`/`or`/`not` on tensors in
kernels as Triton's compiler reads them (klineage.interp)."""

import subprocess
import sys

import pytest

from klineage.check import check
from klineage.program import load_program
from klineage.workload import load_workload
from tests.conftest import FIXTURES

pytestmark = pytest.mark.interpreter
HERE = FIXTURES / "cuda_host"


def _check(name, settings, sandbox, workload="workload.py"):
    report = check(
        load_workload(HERE / workload), load_program(HERE / name), settings, "cpu", ("correctness",), sandbox
    )
    return report.verdict("correctness")


def test_a_cuda_only_program_passes_on_the_cpu_and_says_cuda_was_mapped(settings, sandbox):
    verdict = _check("program_cuda.py", settings, sandbox)
    assert verdict.passed, verdict.reason
    mapped = verdict.evidence["cuda_mapped"]
    for used in (
        "torch.cuda.is_available",
        "torch.cuda.get_device_capability",
        "device='cuda'",
        "Tensor.cuda()",
        "Tensor.to('cuda')",
        "torch.cuda.current_device",
        "driver.active.utils.get_device_properties",
        "torch.cuda.current_stream",
        "torch.cuda.device",
        "torch.cuda.stream",
        "torch.cuda.synchronize",
        "Tensor.is_cuda",
        "Tensor.is_cpu",
        "Tensor.get_device()",
    ):
        assert used in mapped, (used, mapped)


def test_a_cuda_program_computing_with_pytorch_still_fails(settings, sandbox):
    verdict = _check("program_cuda_cheat.py", settings, sandbox)
    assert verdict.code == "torch_compute", (verdict.code, verdict.reason)


def test_a_tensor_and_mask_reads_as_the_compiler_reads_it(settings, sandbox):
    # the stock interpreter summed each row on into the next: on main this fails (unwritten_output: the last row
    # summed the guard's poison)
    verdict = _check("program_and_mask.py", settings, sandbox, "workload_rowsum.py")
    assert verdict.passed, (verdict.code, verdict.reason)
    assert "cuda_mapped" not in verdict.evidence


def test_the_compile_gate_compiles_a_cuda_only_program_for_the_target(settings, sandbox):
    workload, program = load_workload(HERE / "workload.py"), load_program(HERE / "program_cuda.py")
    verdict = check(workload, program, settings, "cpu", ("compile",), sandbox).verdict("compile")
    assert verdict.passed, verdict.reason
    assert "driver.active.utils.get_device_properties" in verdict.evidence["cuda_mapped"]


def test_torch_compile_runs_with_cuda_mapped():
    """With CUDA available, torch.compile saves and restores the CUDA generator's state around each frame it
    compiles (torch._dynamo.convert_frame): a reference compiled with torch.compile (bitsandbytes' pure-PyTorch
    8-bit optimizer) failed there ("Torch not compiled with CUDA enabled") in the mapped candidate process."""
    script = (
        "import torch\n"
        "from klineage import cuda_on_cpu\n"
        "cuda_on_cpu.install()\n"
        "twice = torch.compile(lambda x: x * 2 + 1)\n"
        "print(twice(torch.ones(3, device='cuda')).tolist(), 'torch.cuda.set_rng_state' in cuda_on_cpu.used())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[-2] == "[3.0, 3.0, 3.0] True"
