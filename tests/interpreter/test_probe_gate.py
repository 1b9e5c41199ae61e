"""The correctness gate's probe options that the quality tests do not reach on the CPU: a probe that runs once and
compares its outputs in pieces (the shape of the offsets probe past 2^31 elements, here on a small case)."""

import pytest

from klineage.config import Settings
from klineage.gates import GateRequest, run_gate
from klineage.program import Program, load_program
from klineage.workload import load_workload
from tests.conftest import FIXTURES

pytestmark = pytest.mark.interpreter

PROBE = {
    "name": "pieces",
    "case": {"n": 5000, "dtype": "float16"},
    "layout": None,
    "trials": 1,
    "runs": 1,
    "chunk": 1024,
}


def test_chunked_probe_passes_a_right_program_and_fails_a_wrong_one(tmp_path, sandbox):
    workload = load_workload(FIXTURES / "hinted" / "workload.py")
    settings = Settings(data_dir=tmp_path, seeds=2)
    right = load_program(FIXTURES / "hinted" / "expert.py")
    verdict = run_gate("correctness", GateRequest(str(workload.path), right, "cpu", settings, probe=PROBE), sandbox)
    assert verdict.passed and verdict.metrics["trials"] == 1, (verdict.code, verdict.reason)
    # wrong only past the first piece: a chunked comparison must still look at every piece
    wrong = Program(
        "wrong",
        right.source.replace(
            "tl.store(y_ptr + offs, x * 2, mask=mask)",
            "tl.store(y_ptr + offs, tl.where(offs < 4096, x * 2, x), mask=mask)",
        ),
    )
    assert wrong.source != right.source
    verdict = run_gate("correctness", GateRequest(str(workload.path), wrong, "cpu", settings, probe=PROBE), sandbox)
    assert verdict.status == "fail" and verdict.code == "mismatch", (verdict.code, verdict.reason)


STRIDED = """
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x * 2


CASES = {"tiny": {"n": __N__, "dtype": "float32"}}


def make_inputs(case, seed):
    return [torch.randn(2 * case["n"], generator=torch.Generator().manual_seed(seed))[::2]]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("n, hinted_bits", [(1024, 128), (1000, 32)])
def test_the_contiguity_hint_widens_strided_loads(tmp_path, sandbox, n, hinted_bits):
    """The premise of the GPU contiguity probe (tests/gpu/test_probe_gpu.py), read off the sm_90 SASS on the CPU:
    for a stride-2 input the hinted kernel loads 128 bits at a time (adjacent elements: wrong) where the unhinted
    one loads 32; with a length that is not a multiple of 16 the mask keeps both at 32 bits (the hint is harmless,
    so the fixture's check case must be a multiple of 16)."""
    path = tmp_path / f"strided_{n}.py"
    path.write_text(STRIDED.replace("__N__", str(n)))
    settings = Settings(data_dir=tmp_path, seeds=2)
    expert = load_program(FIXTURES / "hinted" / "expert.py")
    plain = Program(
        "plain",
        expert.source.replace("tl.max_contiguous(tl.multiple_of(offs * stride, BLOCK), BLOCK)", "offs * stride"),
    )
    assert plain.source != expert.source
    bits = [
        run_gate("compile", GateRequest(str(path), p, "cpu", settings), sandbox).metrics["max_load_bits"]
        for p in (expert, plain)
    ]
    assert bits == [hinted_bits, 32]
