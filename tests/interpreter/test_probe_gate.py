"""The correctness gate's probe options that the quality tests do not reach on the CPU: a probe that runs once and
compares its outputs in pieces (the shape of the offsets probe past 2^31 elements, here on a small case)."""

import pytest

from klineage.config import Settings
from klineage.gates import GateRequest, run_gate
from klineage.program import Program, load_program
from klineage.workload import load_workload
from tests.conftest import FIXTURES

pytestmark = pytest.mark.interpreter

PROBE = {"name": "pieces", "case": {"n": 5000, "dtype": "float16"}, "layout": None, "trials": 1, "runs": 1,
         "chunk": 1024}  # fmt: skip


def test_chunked_probe_passes_a_right_program_and_fails_a_wrong_one(tmp_path, sandbox):
    workload = load_workload(FIXTURES / "hinted" / "workload.py")
    settings = Settings(data_dir=tmp_path, seeds=2)
    right = load_program(FIXTURES / "hinted" / "expert.py")
    verdict = run_gate("correctness", GateRequest(str(workload.path), right, "cpu", settings, probe=PROBE), sandbox)
    assert verdict.passed and verdict.metrics["trials"] == 1, (verdict.code, verdict.reason)
    # wrong only past the first piece: a chunked comparison must still look at every piece
    wrong = Program("wrong", right.source.replace("tl.store(y_ptr + offs, x * 2, mask=mask)",
                                                  "tl.store(y_ptr + offs, tl.where(offs < 4096, x * 2, x), mask=mask)"))
    assert wrong.source != right.source
    verdict = run_gate("correctness", GateRequest(str(workload.path), wrong, "cpu", settings, probe=PROBE), sandbox)
    assert verdict.status == "fail" and verdict.code == "mismatch", (verdict.code, verdict.reason)
