"""A crash, a hang or an out-of-memory in a job is a value, and the sandbox keeps working afterwards."""

import pytest

from klineage.gates import verdict_from_result
from klineage.sandbox import Job, Sandbox

pytestmark = pytest.mark.interpreter


@pytest.fixture(params=["warm", "cold"])
def any_sandbox(request, sandbox):
    if request.param == "warm":
        yield sandbox
    else:
        with Sandbox(warm=False) as cold:
            yield cold


def test_value_comes_back(any_sandbox):
    result = any_sandbox.run(Job("tests.fixtures.crashers:echo", {"a": 1}))
    assert result.ok and result.value == {"a": 1}


def test_segfault_is_a_failing_verdict_and_the_next_job_runs(any_sandbox):
    result = any_sandbox.run(Job("tests.fixtures.crashers:segfault", None))
    assert not result.ok and result.kind == "crash" and "SIGSEGV" in result.error
    verdict = verdict_from_result("correctness", result)
    assert verdict.status == "fail" and verdict.code == "crash"
    assert any_sandbox.run(Job("tests.fixtures.crashers:echo", 2)).value == 2


def test_abort_heap_corruption_style(any_sandbox):
    result = any_sandbox.run(Job("tests.fixtures.crashers:abort", None))
    assert result.kind == "crash" and "SIGABRT" in result.error


def test_hang_times_out(any_sandbox):
    result = any_sandbox.run(Job("tests.fixtures.crashers:hang", None, timeout_s=2))
    assert result.kind == "timeout"
    assert verdict_from_result("compile", result).code == "timeout"
    assert any_sandbox.run(Job("tests.fixtures.crashers:echo", 3)).value == 3


def test_out_of_memory_is_reported(any_sandbox):
    result = any_sandbox.run(Job("tests.fixtures.crashers:allocate_too_much", None))
    assert result.kind == "oom"
    assert verdict_from_result("correctness", result).code == "oom"


def test_dead_server_is_replaced():
    with Sandbox(warm=True) as sb:
        assert sb.run(Job("tests.fixtures.crashers:echo", 1)).value == 1
        server = sb._servers[""]
        server.kill()
        server.wait()
        assert sb.run(Job("tests.fixtures.crashers:echo", 5)).value == 5
