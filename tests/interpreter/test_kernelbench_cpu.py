"""An unchanged KernelBench level-1 style file checks on the CPU (issue 31): its full-size get_inputs() (gigabytes)
is shrunk to a small case for the interpreter, checked against the reference, and the sizes used are reported. The
files are written here in KernelBench's style, not copied from it."""

import json
import time

import pytest
from click.testing import CliRunner

from klineage.cli import main
from tests.conftest import FIXTURES

KB = FIXTURES / "kernelbench"
FULL = {
    "swish": {"batch_size": 4096, "dim": 393216},
    "matmul": {"M": 8192, "K": 8195, "N": 6144},
    "sum_dim": {"batch_size": 128, "dim1": 4096, "dim2": 4095},
}


@pytest.mark.sweep(case="swish")
@pytest.mark.parametrize("name", list(FULL))
def test_a_full_size_file_checks_on_the_cpu_in_well_under_a_minute(name):
    began = time.perf_counter()
    args = ["check", str(KB / f"{name}.py"), str(KB / f"{name}_triton.py"), "--device", "cpu", "--no-cache", "--json"]
    result = CliRunner().invoke(main, args)
    took = time.perf_counter() - began
    assert result.exit_code == 0, result.output
    assert took < 60, f"{name}: {took:.1f} s"
    report = json.loads(result.output)
    derived = report["derived_case"]
    assert derived["case"] == "tiny" and derived["full"] == FULL[name]
    assert derived["elements"] <= derived["budget"] < derived["full_elements"]
    correctness = next(v for v in report["verdicts"] if v["gate"] == "correctness")
    assert correctness["status"] == "pass"
    assert {t.split(",")[0] for t in correctness["evidence"]["trials"]} == {"case tiny"}  # never the full size
