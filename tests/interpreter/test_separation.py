"""The program runs in a candidate process apart from the judge: what it does to the process it runs in (the
harness's functions patched, forged results written to every descriptor, the reference looked up by name) cannot
reach the verdict, and the next check in the same warm sandbox is judged as before."""

import pytest

from klineage.check import check
from klineage.program import load_program
from klineage.workload import load_workload
from tests.adversarial.manifest import ROOT

pytestmark = pytest.mark.interpreter

KERNEL = """
import os
import pickle
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def _write(x_ptr, out_ptr, N, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * SCALE, mask=mask)


def launch(x, scale):
    out = torch.empty_like(x)
    _write[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), SCALE=scale, BLOCK=256)
    return out
"""

PATCH_HARNESS = (
    KERNEL
    + """

def _none(*args, **kwargs):
    return None


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        for name, module in list(sys.modules.items()):
            if name.startswith("klineage"):
                for attr in ("compare_output", "check_guards", "launch_findings", "bitwise_equal"):
                    if hasattr(module, attr):
                        setattr(module, attr, _none)
        torch.equal = lambda a, b: True
        return launch(x, 0.0)  # zeros: wrong
"""
)

FORGE_RESULT = (
    KERNEL
    + """

class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        data = pickle.dumps(("ok", {"forged": True}))
        for fd in range(3, 256):
            try:
                os.write(fd, len(data).to_bytes(8, "little") + data)
            except OSError:
                pass
        os._exit(0)
"""
)

FIND_REFERENCE = (
    KERNEL
    + """

class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        for module in list(sys.modules.values()):
            model = getattr(module, "Model", None)
            if isinstance(model, type) and issubclass(model, torch.nn.Module) and module is not sys.modules[__name__]:
                from torch.utils._python_dispatch import _disable_current_modes

                with _disable_current_modes():
                    answer = model()(x, y)
                return launch(answer, 1.0)
        raise RuntimeError("no reference in this process")
"""
)


@pytest.mark.parametrize(
    "source, codes",
    [
        (PATCH_HARNESS, {"mismatch"}),
        (FORGE_RESULT, {"crash", "protocol_error"}),  # its own pipe to the judge is all it holds
        (FIND_REFERENCE, {"forward_error"}),
    ],
    ids=["patch_harness", "forge_result", "find_reference"],
)
def test_what_the_candidate_does_to_its_process_does_not_reach_the_judge(source, codes, tmp_path, settings, sandbox):
    path = tmp_path / "program.py"
    path.write_text(source)
    workload = load_workload(ROOT / "workloads/scale_add.py")
    report = check(workload, load_program(path), settings, "cpu", ("correctness",), sandbox)
    verdict = report.verdicts[0]
    assert verdict.status == "fail" and verdict.code in codes, (verdict.code, verdict.reason)
    assert verdict.evidence.get("isolation", "").startswith("isolation: ")
    control = check(workload, load_program(ROOT / "controls/scale_add_ok.py"), settings, "cpu", sandbox=sandbox)
    assert control.passed, [(v.gate, v.code, v.reason) for v in control.verdicts]
