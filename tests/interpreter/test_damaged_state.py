"""Damaged state and a candidate past its memory limit, through a real check: `klineage check` with a verdict cache
overwritten with garbage or cut in half says so in one warning line, moves it aside and checks as if it were empty
(before: a 32-line traceback on every command until the file was deleted by hand); a forward that allocates past
the sandbox's memory limit fails the correctness gate with `oom` and the size it asked for (before:
`forward_error`)."""

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from klineage.check import check
from klineage.cli import main
from klineage.program import load_program
from klineage.sandbox import MEMORY_LIMIT_CPU
from klineage.workload import load_workload

pytestmark = pytest.mark.interpreter

SOFTMAX = Path(__file__).parents[2] / "src" / "klineage" / "examples" / "softmax"


def _check_json(home: Path) -> tuple[dict, list[str]]:
    result = CliRunner().invoke(
        main,
        [
            "check",
            str(SOFTMAX / "workload.py"),
            str(SOFTMAX / "naive.py"),
            "--device",
            "cpu",
            "--gates",
            "compile",
            "--json",
        ],
        env={"KLINEAGE_HOME": str(home)},
    )
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    return json.loads(result.stdout), [line for line in result.stderr.splitlines() if line.startswith("warning")]


def test_check_moves_a_damaged_cache_aside_and_goes_on(tmp_path):
    cache = tmp_path / "cache.sqlite"
    cache.write_bytes(os.urandom(20000))
    report, warnings = _check_json(tmp_path)
    (aside,) = tmp_path.glob("cache.sqlite.corrupt-*")
    assert report["verdicts"][0]["status"] == "pass" and not report["verdicts"][0]["cached"]
    assert len(warnings) == 1 and str(cache) in warnings[0] and str(aside) in warnings[0]
    report, warnings = _check_json(tmp_path)  # the rebuilt cache serves the next check
    assert report["verdicts"][0]["cached"] and warnings == []
    data = cache.read_bytes()
    cache.write_bytes(data[: len(data) // 2])  # cut in half
    report, warnings = _check_json(tmp_path)
    assert report["verdicts"][0]["status"] == "pass" and len(warnings) == 1
    assert len(list(tmp_path.glob("cache.sqlite.corrupt-*"))) == 2


OOM_PROGRAM = """
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        scratch = {allocation}  # past the sandbox's memory limit
        y = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
"""


def test_a_forward_past_the_memory_limit_is_oom(tmp_path, sandbox, settings):
    size = MEMORY_LIMIT_CPU + 2**30  # 17 GiB: the case (Python's own MemoryError: test_oom_finding.py)
    path = tmp_path / "oom.py"
    path.write_text(OOM_PROGRAM.replace("{allocation}", f"torch.empty({size}, dtype=torch.uint8)"))
    report = check(
        load_workload(SOFTMAX / "workload.py"), load_program(path), settings, "cpu", ("correctness",), sandbox
    )
    (verdict,) = report.verdicts
    assert (verdict.status, verdict.code) == ("fail", "oom"), verdict
    assert verdict.reason.startswith("out of host memory, asking for 17.00 GiB"), verdict.reason
