"""`klineage check --sanitize`: reading memcheck's report, and the one-line answers where it cannot run."""

from klineage.program import Program
from klineage.sanitize import ERROR_EXIT, SANITIZER_ERROR, find_sanitizer, result_of, sanitize

MEMCHECK_ERROR = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at add_kernel+0x2d0
=========     by thread (31,0,0) in block (3,0,0)
=========     Address 0x7f2a3c000400 is out of bounds
========= ERROR SUMMARY: 1 error
"""


def test_an_error_is_a_stable_failure():
    result = result_of(ERROR_EXIT, MEMCHECK_ERROR)
    assert (result.status, result.code) == ("fail", SANITIZER_ERROR)
    assert "Invalid __global__ write of size 4 bytes" in result.detail and not result.passed
    assert result.line().startswith("sanitize: fail (sanitizer_error): memcheck found 1 errors")


def test_a_clean_run_passes_and_a_broken_one_is_an_error():
    assert result_of(0, "========= ERROR SUMMARY: 0 errors\n").status == "pass"
    broken = result_of(1, "Traceback (most recent call last):\nImportError: no module\n")
    assert (broken.status, broken.code) == ("error", "sanitizer_failed") and "ImportError" in broken.detail


def test_without_a_gpu_or_the_tool_it_says_so_in_one_line(monkeypatch):
    program = Program("p", "class ModelNew: pass\n")
    no_gpu = sanitize("workload.py", program, gpu=False)
    assert (no_gpu.status, no_gpu.code) == ("skip", "no_gpu") and no_gpu.passed and "\n" not in no_gpu.line()
    monkeypatch.setattr("klineage.sanitize.find_sanitizer", lambda: None)
    missing = sanitize("workload.py", program, gpu=True)
    assert (missing.status, missing.code) == ("skip", "no_sanitizer") and "\n" not in missing.line()


def test_find_sanitizer_looks_on_path(tmp_path, monkeypatch):
    tool = tmp_path / "compute-sanitizer"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_sanitizer() == str(tool)
