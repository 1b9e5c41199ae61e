"""Issue 30's host-reach and judge-tampering attacks, run as trusted programs (no static policy in the way: what
must stop them is the process split and the candidate's OS isolation), checked by their effect: the file was not
written, read or deleted, the listener got no connection, no process outlived the check, the parent survived, a
forged or cached verdict was not believed. A harmless attack may still pass on its values; what it must not do is
reach the host.

The attacks act only inside /tmp/klineage-redteam, a folder these tests make (owned by the caller, mode 0755) and
remove, and only while it exists; a lock file lets one test session at a time own it. Tests of holes main leaves
open are strict xfails (OPEN_EFFECTS): remove an entry when a branch closes it."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import socket
import time
from pathlib import Path

import pytest

from klineage.program import load_program
from klineage.sandbox import Sandbox
from tests.adversarial.manifest import CASES, ROOT
from tests.adversarial.runner import first_failure, run_case

pytestmark = pytest.mark.interpreter

REDTEAM = Path("/tmp/klineage-redteam")
STRAY = Path("/tmp/klineage-redteam-stray")  # write_tmp's target, straight in /tmp
ORPHAN_MARK = b"klineage-redteam-orphan"

# what main (b5caf8b) lets each attack do, by test name: a strict xfail until a branch closes it
# (test_candidate_cannot_reach_a_unix_socket closed on branch holes: /tmp, /var/tmp and /run are masked by an empty
# tmpfs in the candidate's mount namespace, isolation.SHARED_DIRS)
OPEN_EFFECTS: dict[str, str] = {}


def _open(test):
    """A strict xfail for a test whose hole main leaves open."""
    reason = OPEN_EFFECTS.get(test.__name__)
    mark = pytest.mark.xfail(strict=True, raises=AssertionError, reason=f"open hole: {reason}")
    return mark(test) if reason else test


def _case(name: str):
    return next(c for c in CASES if c.program == f"programs/{name}.py")


def _run_trusted(name: str, settings, sandbox):
    return run_case(_case(name), settings, "cpu", sandbox, trusted=True)


@pytest.fixture
def redteam():
    """The attacks' target folder, fresh: a 0600 secret, a victim file; removed afterwards with whatever landed."""
    with open("/tmp/klineage-redteam.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another session's tests would see this one's files
        try:
            shutil.rmtree(REDTEAM, ignore_errors=True)
            STRAY.unlink(missing_ok=True)
            REDTEAM.mkdir(mode=0o755)
            REDTEAM.chmod(0o755)  # whatever the umask: others may look in, not write
            secret = REDTEAM / "secret"
            secret.write_text("redteam secret")
            secret.chmod(0o600)
            (REDTEAM / "victim").write_text("keep me")
            yield REDTEAM
        finally:
            shutil.rmtree(REDTEAM, ignore_errors=True)
            STRAY.unlink(missing_ok=True)
            fcntl.flock(lock, fcntl.LOCK_UN)


@_open
def test_candidate_cannot_write_into_the_callers_folder(redteam, settings, sandbox):
    _run_trusted("write_outside", settings, sandbox)
    assert not (redteam / "written").exists()


@_open
def test_candidate_cannot_write_into_the_shared_tmp(redteam, settings, sandbox):
    _run_trusted("write_tmp", settings, sandbox)
    assert not STRAY.exists()


@_open
def test_candidate_cannot_read_the_callers_private_file(redteam, settings, sandbox):
    """read_secret answers honestly only if it read the secret: a pass is the proof it did."""
    assert not _run_trusted("read_secret", settings, sandbox).passed


@_open
def test_candidate_cannot_delete_the_callers_file(redteam, settings, sandbox):
    _run_trusted("delete_outside", settings, sandbox)
    assert (redteam / "victim").exists(), "the candidate deleted the caller's file"


@_open
def test_torch_alone_cannot_write_outside(redteam, settings, sandbox):
    _run_trusted("torch_save_outside", settings, sandbox)
    assert not (redteam / "written-by-torch").exists()


@_open
def test_torch_alone_cannot_read_a_private_file(redteam, settings, sandbox):
    """from_file_secret's constructor raises where the read is refused: a pass is the proof it read the file."""
    assert not _run_trusted("from_file_secret", settings, sandbox).passed


@_open
def test_torch_alone_cannot_change_a_file_outside(redteam, settings, sandbox):
    _run_trusted("from_file_shared_write", settings, sandbox)
    assert (redteam / "victim").read_bytes() == b"keep me"


@_open
def test_candidate_cannot_reach_a_loopback_listener(redteam, settings, sandbox):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        (redteam / "port").write_text(str(listener.getsockname()[1]))
        _run_trusted("loopback_connect", settings, sandbox)
        listener.setblocking(False)  # a connection made while nobody accepted waits in the backlog
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            return
        conn.close()
        raise AssertionError("the candidate connected to the test's loopback listener")


@_open
def test_candidate_cannot_reach_a_unix_socket(redteam, settings, sandbox):
    with socket.socket(socket.AF_UNIX) as listener:
        path = redteam / "sock"
        listener.bind(str(path))
        path.chmod(0o777)  # as a desktop or container socket often is: the uid alone does not stop a connect
        listener.listen(4)
        _run_trusted("unix_socket_connect", settings, sandbox)
        listener.setblocking(False)
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            return
        conn.close()
        raise AssertionError("the candidate connected to the test's unix socket")


def _marked_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if ORPHAN_MARK in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
    return pids


@_open
def test_no_candidate_process_outlives_the_check(redteam, settings, sandbox):
    _run_trusted("orphan_children", settings, sandbox)
    time.sleep(1.0)  # the double fork's grandchild starts a moment after its parent
    left = _marked_pids()
    for pid in left:  # the attack's own sleepers, by pid
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"{len(left)} of the candidate's processes outlived the check"


@_open
def test_candidate_cannot_kill_its_parent(redteam, settings, sandbox):
    """kill_parent returns zeros after its kill: a mismatch says the kill was refused and the judge went on."""
    verdict = first_failure(_run_trusted("kill_parent", settings, sandbox))
    assert verdict.code == "mismatch", f"{verdict.code}: {verdict.reason[:300]}"


@_open
def test_candidate_cannot_read_the_data_directory(redteam, settings, sandbox):
    """read_data_dir answers honestly only if it read the verdict cache: a pass is the proof it did."""
    assert not _run_trusted("read_data_dir", settings, sandbox).passed


@_open
def test_a_forged_result_file_is_not_believed(redteam, settings, sandbox):
    assert not _run_trusted("forge_result_exit", settings, sandbox).passed


@_open
def test_a_result_pickle_never_runs_code_in_the_caller(redteam, settings, sandbox):
    report = _run_trusted("pickle_payload", settings, sandbox)
    assert not (redteam / "pickle-ran").exists()
    assert not report.passed


@_open
def test_a_tampered_worker_does_not_pass_later_candidates(redteam, settings):
    """replace_collector rewrites the warm server's collector; a wrong program checked next in the same sandbox
    must still fail."""
    from klineage.check import check
    from klineage.workload import load_workload

    workload = load_workload(ROOT / "workloads/scale_add.py")
    attack, victim = (
        load_program(ROOT / "programs/replace_collector.py"),
        load_program(ROOT / "victims/scale_add_zeros.py"),
    )
    with Sandbox(warm=True) as box:  # the attack's own: a hole must not spill into the session's other tests
        check(workload, attack, settings, "cpu", ("correctness",), box)
        report = check(workload, victim, settings, "cpu", ("correctness",), box)
    assert not report.passed


@_open
def test_a_reply_written_into_the_servers_pipe_is_not_believed(redteam, settings):
    """forge_protocol_reply writes a pickled passing reply into the warm server's reply pipe: no code of it may run
    in this process, the check must not pass, and the next check in the same sandbox gets its own verdict."""
    from klineage.check import check
    from klineage.workload import load_workload

    attack = load_program(ROOT / "programs/forge_protocol_reply.py")
    victim = load_program(ROOT / "victims/scale_add_zeros.py")
    with Sandbox(warm=True) as box:  # its own: a desynchronized server must not serve the session's other tests
        report = check(load_workload(ROOT / "workloads/softmax.py"), attack, settings, "cpu", ("correctness",), box)
        after = check(load_workload(ROOT / "workloads/scale_add.py"), victim, settings, "cpu", ("correctness",), box)
    assert not (redteam / "caller-ran").exists(), "the candidate's pickle ran in the caller"
    assert not report.passed
    assert first_failure(after).code == "mismatch", first_failure(after).reason[:300]


@_open
def test_a_candidate_cannot_write_verdicts_into_the_cache(redteam, settings, sandbox):
    """cache_poison stores passing verdicts for the zeros victim; checked afterwards with the cache on, the victim
    must fail, and not from the cache."""
    from dataclasses import replace

    from klineage.check import check
    from klineage.workload import load_workload

    settings = replace(settings, use_cache=True)
    _run_trusted("cache_poison", settings, sandbox)
    victim = load_program(ROOT / "victims/scale_add_zeros.py")
    report = check(load_workload(ROOT / "workloads/scale_add.py"), victim, settings, "cpu", ("correctness",), sandbox)
    assert not report.passed and not any(report.cached)


# attacks that tamper with the judge, run trusted (past the policy): closed by the judge's own process (judge-j)
TAMPERING = {
    "patch_harness_guards": "patches the judge's guards from the candidate's import",
    "patch_torch_compare": "patches torch's comparisons",
    "registry_reference": "finds the workload's Model by the class registry",
    "builtins_gc_reference": "finds the judge's Model instance through gc",
}


@pytest.mark.parametrize("name", list(TAMPERING))
def test_trusted_tampering_still_fails(name, settings, sandbox):
    """Without the policy, patching the judge's code or torch, or finding the reference, must still fail: the
    judge compares in its own process, and the reference is not in the candidate's."""
    assert not _run_trusted(name, settings, sandbox).passed


# compute in a callback Triton calls inside its launcher (ban off there for Triton's own work), run trusted: a
# library's program is not scanned, so the launch path itself must keep the ban for the program's callbacks
LAUNCH_CALLBACKS = {
    "grid_callback_compute": "softmax in the grid lambda",
    "grid_calls_helper": "softmax in a helper the grid calls",
    "pre_run_hook_compute": "softmax in a JITFunction pre-run hook",
    "heuristic_compute": "softmax in a triton.heuristics function",
    "autotune_hook_compute": "softmax in a triton.Config pre_hook",
}


@pytest.mark.parametrize("name", list(LAUNCH_CALLBACKS))
def test_trusted_launch_callback_compute_fails(name, settings, sandbox):
    """Past the policy, PyTorch compute in a grid function or a pre-run hook fails as torch_compute."""
    verdict = first_failure(_run_trusted(name, settings, sandbox))
    assert verdict.code == "torch_compute", f"{verdict.code}: {verdict.reason[:300]}"


# import-time code of a trusted program that writes into the caller's folder, the data directory and the home, and
# forges a passing compile report from inside the process that runs it: the compile gate's program runs in a
# confined candidate process now, so none of the files appear, and the gate's verdict is the judge's own
IMPORT_TIME_WRITER = """
import pathlib

import torch
import triton
import triton.language as tl

for where in ({targets}):
    try:
        pathlib.Path(where, "written-at-import").write_text("reached the host")
    except OSError:
        pass

try:  # forge the judge's verdict, as it could while the compile gate ran in the judge
    import klineage.gates.compile as gate
    from klineage.gates.common import Verdict

    gate.compile_job = lambda request: Verdict("compile", "pass", metrics={{"forged": 1}})
    gate._target_verdict = lambda *a, **k: Verdict("compile", "pass", metrics={{"forged": 1}})
except Exception:
    pass


@triton.jit
def _scale_add_kernel(x_ptr, y_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    tl.store(out_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        N = out.numel()
        _scale_add_kernel[(triton.cdiv(N, 256),)](x, y, out, N, BLOCK=256)
        return out
"""


def test_the_compile_gates_program_does_not_reach_the_host(redteam, settings, sandbox):
    """Run trusted under the compile gate alone: its import-time writes land nowhere the caller can see, and the
    verdict is built by the judge from the candidate's report (its specializations, its isolation line)."""
    from klineage.check import check
    from klineage.program import Program
    from klineage.workload import load_workload

    home = Path.home()
    targets = [redteam, settings.data_dir, home]
    source = IMPORT_TIME_WRITER.format(targets=", ".join(repr(str(t)) for t in targets))
    workload = load_workload(ROOT / "workloads/scale_add.py")
    try:
        report = check(workload, Program("import_time_writer", source), settings, "cpu", ("compile",), sandbox)
        written = [t for t in targets if (Path(t) / "written-at-import").exists()]
    finally:
        for t in targets:
            (Path(t) / "written-at-import").unlink(missing_ok=True)
    assert not written, f"the compile gate's program wrote into {written}"
    verdict = report.verdicts[0]
    assert verdict.passed, f"{verdict.code}: {verdict.reason[:300]}"
    assert "forged" not in verdict.metrics and verdict.metrics["specializations"] >= 1
    assert "isolation" in verdict.evidence
