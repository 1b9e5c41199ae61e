"""Jobs sharing one GPU take turns through $KLINEAGE_GPU_LOCK: checks run side by side, a job that times runs alone,
and a waiting timer is not starved by checks that keep arriving. Without the variable nothing is locked."""

import fcntl
import threading
import time

from klineage.sandbox import Job, Sandbox, gpu_turn


def _try(path, mode) -> bool:
    with open(path, "a") as other:
        try:
            fcntl.flock(other, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(other, fcntl.LOCK_UN)
        return True


def test_checks_share_the_gpu_and_a_timer_has_it_alone(tmp_path, monkeypatch):
    path = tmp_path / "gpu0.lock"
    monkeypatch.setenv("KLINEAGE_GPU_LOCK", str(path))
    with gpu_turn(exclusive=False):
        assert _try(path, fcntl.LOCK_SH) and not _try(path, fcntl.LOCK_EX)
    with gpu_turn(exclusive=True):
        assert not _try(path, fcntl.LOCK_SH)
    assert _try(path, fcntl.LOCK_EX)  # released after, also when the job raised
    try:
        with gpu_turn(exclusive=True):
            raise RuntimeError("a failed timing still lets go")
    except RuntimeError:
        pass
    assert _try(path, fcntl.LOCK_EX)


def test_a_waiting_timer_goes_before_checks_that_arrive_after_it(tmp_path, monkeypatch):
    monkeypatch.setenv("KLINEAGE_GPU_LOCK", str(tmp_path / "gpu0.lock"))
    order, release = [], threading.Event()

    def job(name, exclusive, hold):
        with gpu_turn(exclusive):
            order.append(name)
            if hold:
                release.wait(10)

    first = threading.Thread(target=job, args=("check 1", False, True))
    first.start()
    time.sleep(0.2)
    timer = threading.Thread(target=job, args=("timer", True, False))
    timer.start()
    time.sleep(0.2)
    late = threading.Thread(target=job, args=("check 2", False, False))
    late.start()
    time.sleep(0.2)
    assert order == ["check 1"]  # the timer waits for the running check; the late check waits behind the timer
    release.set()
    for t in (first, timer, late):
        t.join(10)
    assert order == ["check 1", "timer", "check 2"]


def test_without_the_variable_nothing_is_locked(tmp_path, monkeypatch):
    monkeypatch.delenv("KLINEAGE_GPU_LOCK", raising=False)
    with gpu_turn(exclusive=True):
        assert not list(tmp_path.iterdir())


def lock_mode_job(path: str) -> str:
    """Run inside a sandbox child: how does this job hold the GPU lock?"""
    if _try(path, fcntl.LOCK_SH):
        return "shared" if not _try(path, fcntl.LOCK_EX) else "none"
    return "exclusive"


def test_sandbox_jobs_on_cuda_take_their_turn_by_kind(tmp_path):
    path = str(tmp_path / "gpu0.lock")
    env = {"KLINEAGE_DEVICE": "cuda", "KLINEAGE_GPU_LOCK": path}
    with Sandbox(warm=False) as sb:
        fn = "tests.unit.test_gpu_lock:lock_mode_job"
        assert sb.run(Job(fn, path, env=env)).value == "shared"
        assert sb.run(Job(fn, path, env=env, times_gpu=True)).value == "exclusive"
        assert sb.run(Job(fn, path, env={**env, "KLINEAGE_DEVICE": "cpu"}, times_gpu=True)).value == "none"
