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


def test_the_cpu_cap_is_on_top_of_what_a_job_starts_with(any_sandbox):
    """Not an absolute cap: a process that maps gigabytes before the job (a CUDA build of torch) keeps 16 GiB to
    allocate. An absolute one equals MEMORY_LIMIT_CPU, whatever the child started with."""
    from klineage.sandbox import MEMORY_LIMIT_CPU

    cap, mapped = any_sandbox.run(Job("tests.fixtures.crashers:address_space", None)).value
    assert mapped > 0 and cap > MEMORY_LIMIT_CPU
    assert cap - mapped > MEMORY_LIMIT_CPU // 2


def test_dead_server_is_replaced():
    with Sandbox(warm=True) as sb:
        assert sb.run(Job("tests.fixtures.crashers:echo", 1)).value == 1
        server = sb._servers[""]
        server.kill()
        server.wait()
        assert sb.run(Job("tests.fixtures.crashers:echo", 5)).value == 5


def test_a_warm_child_inherits_the_servers_preloads(sandbox):
    # torch._dynamo's first import and Triton's install hash cost every child 5 of a 7 s check on the H200 image
    # when the server left them undone (session 13); a child forked from the server must find both done
    found = sandbox.run(Job("tests.fixtures.crashers:inherited", None)).value
    assert found == {"dynamo": True, "triton_key": True}
    with Sandbox(warm=False) as cold:  # the control: a fresh process has done neither
        assert cold.run(Job("tests.fixtures.crashers:inherited", None)).value == {"dynamo": False, "triton_key": False}


def test_a_result_that_would_run_code_when_read_is_refused(any_sandbox, tmp_path):
    """A child that ran untrusted code could hand back a pickle that runs a command in whoever reads it (the warm
    server, then the caller): results are read with an allow-list of globals, so it is a crash, not a command."""
    marker = tmp_path / "ran"
    result = any_sandbox.run(Job("tests.fixtures.crashers:evil_result", str(marker)))
    assert not result.ok and result.kind == "crash"
    assert not marker.exists()
    assert any_sandbox.run(Job("tests.fixtures.crashers:echo", 4)).value == 4


def test_a_warm_child_holds_none_of_the_servers_pipes(sandbox):
    """Only the result pipe (and what the job itself opened) is open in a job's child: through the server's
    protocol pipe a child could answer the caller in the server's name."""
    held = sandbox.run(Job("tests.fixtures.crashers:server_pipes", None)).value
    assert len(held) <= 2, held  # the result pipe, and the directory listing's own descriptor
