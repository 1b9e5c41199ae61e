"""A candidate that passes its memory limit fails the correctness gate with `oom` and the size it asked for, not
`forward_error`: the errors here are the real ones PyTorch, numpy and Python raise for an allocation refused (a
petabyte, past any address space), and the text of PyTorch's CUDA one."""

import numpy as np
import pytest
import torch

from klineage.gates.common import memory_finding

PETABYTE = 2**50


def _raised(allocate) -> BaseException:
    with pytest.raises(Exception) as caught:
        allocate()
    return caught.value


def test_the_cpu_allocators_refusals_are_oom_with_the_size_asked():
    torch_cpu = memory_finding(_raised(lambda: torch.empty(PETABYTE, dtype=torch.uint8)))
    assert torch_cpu.code == "oom" and "out of host memory, asking for 1048576.00 GiB (1125899906842624 bytes)" in (
        torch_cpu.detail
    )
    numpy = memory_finding(_raised(lambda: np.empty(PETABYTE, dtype=np.uint8)))
    assert numpy.code == "oom" and "asking for 1.00 PiB" in numpy.detail
    python = memory_finding(_raised(lambda: bytearray(PETABYTE)))
    assert python.code == "oom" and "the size asked not reported" in python.detail


def test_cuda_out_of_memory_is_oom_on_the_device():
    error = torch.OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 17.00 GiB. GPU 0 has a total capacity of 139.81 GiB of which 2.1 GiB "
        "is free."
    )
    found = memory_finding(error)
    assert found.code == "oom" and found.detail.startswith("out of device memory, asking for 17.00 GiB")
    assert memory_finding(RuntimeError("CUDA error: out of memory")).detail.startswith("out of device memory")


def test_other_errors_are_not_oom():
    # Triton's shared-memory refusal is the compile gate's `out of resource`, not a memory limit
    assert (
        memory_finding(RuntimeError("out of resource: shared memory, Required: 294944, Hardware limit: 232448")) is None
    )
    assert memory_finding(ValueError("shape mismatch")) is None
    assert memory_finding(_raised(lambda: torch.empty(-1))) is None


def test_an_allocation_that_leaves_the_job_is_oom():
    """The program's constructor or import ran out (the sandbox reports `<type>: <text>`): a failing `oom`, not the
    `error` status that says the harness failed."""
    from klineage.gates import verdict_from_result
    from klineage.sandbox import SandboxResult

    said = str(_raised(lambda: torch.empty(PETABYTE, dtype=torch.uint8)))
    verdict = verdict_from_result("correctness", SandboxResult(False, error=f"RuntimeError: {said}", kind="exception"))
    assert (verdict.status, verdict.code) == ("fail", "oom") and verdict.reason.startswith("out of host memory")
    other = verdict_from_result("compile", SandboxResult(False, error="KeyError: 'x'", kind="exception"))
    assert (other.status, other.code) == ("error", "error")
