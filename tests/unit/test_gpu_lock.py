"""Jobs sharing one GPU take turns through a lock file (Settings.gpu_lock, from $KLINEAGE_GPU_LOCK; a job carries it
in its GpuTurns): every job holds a shared turn, a measurement trades it for the GPU alone (exclusive_turn) and
back, a waiting timer is not starved by checks that keep arriving, and a check lets a waiting timer go between its
trials (yield_turn) and while it works off the GPU (off_gpu). Without a lock file nothing is locked."""

import fcntl
import threading
import time
from dataclasses import replace

import pytest

from klineage.config import Settings
from klineage.sandbox import GpuTurns, Job, Sandbox, exclusive_turn, gpu_turn, off_gpu, take_turns, yield_turn


@pytest.fixture
def turns():
    """Takes turns in this process as a job's child would, through the lock file given; none again after."""
    yield lambda lock, hold="work": take_turns(GpuTurns(str(lock), hold))
    take_turns(GpuTurns())


def _try(path, mode) -> bool:
    with open(path, "a") as other:
        try:
            fcntl.flock(other, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(other, fcntl.LOCK_UN)
        return True


def test_checks_share_the_gpu_and_a_timer_has_it_alone(tmp_path, turns):
    path = tmp_path / "gpu0.lock"
    turns(path)
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


def test_a_waiting_timer_goes_before_checks_that_arrive_after_it(tmp_path, turns):
    turns(tmp_path / "gpu0.lock")
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


def test_without_a_lock_file_nothing_is_locked(tmp_path):
    take_turns(GpuTurns())
    with gpu_turn(exclusive=True):
        assert not list(tmp_path.iterdir())


def lock_mode_job(path: str) -> str:
    """Run inside a sandbox child: how does this job hold the GPU lock?"""
    if _try(path, fcntl.LOCK_SH):
        return "shared" if not _try(path, fcntl.LOCK_EX) else "none"
    return "exclusive"


def trading_job(path: str) -> tuple[str, str, str]:
    """Inside a sandbox child: the lock mode before, during and after a measured section."""
    before = lock_mode_job(path)
    with exclusive_turn():
        during = lock_mode_job(path)
    return before, during, lock_mode_job(path)


@pytest.mark.interpreter  # starts sandbox children
@pytest.mark.parametrize("warm", [False, True])
def test_sandbox_jobs_hold_a_shared_turn_and_measurements_trade_up(tmp_path, warm):
    path = str(tmp_path / "gpu0.lock")
    on_gpu = {"device": "cuda", "turns": GpuTurns(path)}
    with Sandbox(warm=warm, preload=("klineage.sandbox",)) as sb:  # warm: forked from a server, as bench runs
        assert sb.run(Job("tests.unit.test_gpu_lock:lock_mode_job", path, **on_gpu)).value == "shared"
        traded = sb.run(Job("tests.unit.test_gpu_lock:trading_job", path, **on_gpu))
        assert traded.value == ("shared", "exclusive", "shared"), traded
        cpu = sb.run(Job("tests.unit.test_gpu_lock:lock_mode_job", path, **{**on_gpu, "device": "cpu"}))
        assert cpu.value == "none"
        # a check run again alone (check.py, after running out of device memory beside others) holds it throughout
        alone = sb.run(Job("tests.unit.test_gpu_lock:trading_job", path, **on_gpu, gpu_alone=True))
        assert alone.value == ("exclusive", "exclusive", "exclusive"), alone
    assert _try(path, fcntl.LOCK_EX)  # nothing left held once the jobs are over


def racing_job(payload: tuple[str, str]) -> tuple[float, float]:
    """Hold the shared turn long enough that the other job holds it too, then measure: when was the GPU ours?"""
    path, _ = payload
    time.sleep(0.5)
    with exclusive_turn():
        start = time.time()
        assert lock_mode_job(path) == "exclusive"
        time.sleep(0.3)
        return start, time.time()


@pytest.mark.interpreter  # starts sandbox children
def test_two_jobs_trading_up_at_once_take_turns_without_deadlock(tmp_path):
    path = str(tmp_path / "gpu0.lock")
    results = {}

    def run(name):
        with Sandbox(warm=False) as sb:
            job = Job("tests.unit.test_gpu_lock:racing_job", (path, name), timeout_s=30, device="cuda")
            results[name] = sb.run(replace(job, turns=GpuTurns(path)))

    threads = [threading.Thread(target=run, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    (a0, a1), (b0, b1) = results["a"].value, results["b"].value
    assert a1 <= b0 or b1 <= a0  # the measured sections never overlap


def test_a_measurement_inside_an_exclusive_turn_does_not_wait_on_itself(tmp_path, turns):
    path = tmp_path / "gpu0.lock"
    turns(path)
    done = threading.Event()

    def nested():
        with gpu_turn(exclusive=True), exclusive_turn():
            done.set()

    worker = threading.Thread(target=nested, daemon=True)
    worker.start()
    assert done.wait(5)  # a script that holds the GPU and then times (profile_vs_do_bench) must not deadlock
    worker.join(5)
    assert _try(path, fcntl.LOCK_EX)


def timer_job(path: str) -> tuple[float, float]:
    """Inside a sandbox child: a measurement of 0.3 s with the GPU alone; when did it have the GPU?"""
    with exclusive_turn():
        start = time.time()
        time.sleep(0.3)
        return start, time.time()


@pytest.mark.interpreter  # starts sandbox children
def test_a_check_lets_a_waiting_timer_measure_between_two_trials(tmp_path, turns):
    path = str(tmp_path / "gpu0.lock")
    turns(path)
    with gpu_turn(exclusive=False):  # this test plays a check holding its shared turn
        yield_turn()  # no timer waiting: the check goes on holding its turn
        assert lock_mode_job(path) == "shared"
        results = {}

        def timer():
            with Sandbox(warm=False) as sb:
                job = Job("tests.unit.test_gpu_lock:timer_job", path, timeout_s=60, device="cuda", turns=GpuTurns(path))
                results["timer"] = sb.run(job)

        thread = threading.Thread(target=timer)
        thread.start()
        deadline = time.time() + 30
        while _try(path + ".turn", fcntl.LOCK_EX) and time.time() < deadline:  # until the timer waits at the turnstile
            time.sleep(0.05)
        time.sleep(0.3)
        assert thread.is_alive()  # it waits for this check's turn
        yield_turn()
        resumed = time.time()
        assert lock_mode_job(path) == "shared"  # the check has its turn back
        thread.join(30)
    start, end = results["timer"].value
    assert start < resumed and end <= resumed  # the timer measured before the check went on


def test_a_section_off_the_gpu_lets_a_timer_have_it(tmp_path, turns):
    path = str(tmp_path / "gpu0.lock")
    turns(path)
    with gpu_turn(exclusive=False):
        with off_gpu():
            assert _try(path, fcntl.LOCK_EX)  # nothing of this job is held while it disassembles
        assert lock_mode_job(path) == "shared"
    take_turns(GpuTurns())
    with off_gpu():  # without the lock: nothing to let go
        yield_turn()


@pytest.mark.interpreter  # starts sandbox children
def test_whole_job_turns_keep_a_checks_turn_and_still_let_a_measurement_trade_up(tmp_path, turns):
    """KLINEAGE_TURNS=job, the comparison arm of benchmarks/gpu_turns.py: a check keeps its turn throughout, and a
    timer still trades its own shared turn for the GPU alone (letting it go is not optional there: it would wait on
    itself)."""
    path = str(tmp_path / "gpu0.lock")
    turns(path, hold="job")
    with gpu_turn(exclusive=False):
        with off_gpu():
            assert lock_mode_job(path) == "shared"
    with Sandbox(warm=False) as sb:
        job = Job(
            "tests.unit.test_gpu_lock:trading_job", path, timeout_s=30, device="cuda", turns=GpuTurns(path, "job")
        )
        traded = sb.run(job)
    assert traded.value == ("shared", "exclusive", "shared"), traded


def test_a_job_lets_go_of_its_turn_only_once_its_gpu_work_is_done(tmp_path, monkeypatch, turns):
    """Kernels a program left running on a side stream must not land inside a timer's measurement: before a check
    lets a timer go, it synchronizes the device (every stream). A fake torch records the call."""
    import sys
    import types

    calls = []
    fake = types.SimpleNamespace(
        cuda=types.SimpleNamespace(is_initialized=lambda: True, synchronize=lambda: calls.append("sync"))
    )
    monkeypatch.setitem(sys.modules, "torch", fake)
    path = str(tmp_path / "gpu0.lock")
    turns(path)
    with gpu_turn(exclusive=False):
        yield_turn()
        assert calls == []  # no timer waiting: nothing to wait for
        with off_gpu():
            assert calls == ["sync"] and _try(path, fcntl.LOCK_EX)


def test_the_lock_and_whole_job_turns_are_read_from_the_environment_once(monkeypatch):
    """The users' knobs (benchmarks/h200_eval.sh sets them) reach every job through Settings, not the environment."""
    monkeypatch.setenv("KLINEAGE_GPU_LOCK", "/tmp/klineage-gpu3.lock")
    monkeypatch.setenv("KLINEAGE_TURNS", "job")
    assert GpuTurns.of(Settings.from_env()) == GpuTurns("/tmp/klineage-gpu3.lock", hold="job")
    monkeypatch.delenv("KLINEAGE_GPU_LOCK")
    monkeypatch.setenv("KLINEAGE_TURNS", "trial")
    assert GpuTurns.of(Settings.from_env()) == GpuTurns()


def test_a_candidates_turns_are_the_judges(tmp_path, turns):
    """A candidate process cannot take turns (confinement closed its copy of the lock file): it asks its judge
    (sandbox.broker_turns), and the judge, holding the job's shared turn, trades it for the candidate's timed
    section and takes it back after; time_calls, autotuners_alone, off_gpu and yield_turn work unchanged there."""
    import os

    from klineage import sandbox
    from klineage.gates.candidate import Candidate

    path = tmp_path / "gpu0.lock"
    turns(path)
    asked = []
    sandbox.broker_turns(lambda kind, entering: asked.append((kind, entering)))
    try:
        with exclusive_turn(), off_gpu():
            yield_turn()
    finally:
        sandbox._broker.clear()
    assert asked == [("exclusive", True), ("off", True), ("yield", True), ("off", False), ("exclusive", False)]

    down_r, down_w = os.pipe()
    judge = Candidate(0, down_w, down_r, tmp_path)
    held: list = []
    with gpu_turn(exclusive=False):  # the judge's job: a shared turn
        judge._turn({"turn": "exclusive", "enter": True}, held)
        assert not _try(path, fcntl.LOCK_SH)  # the candidate's section has the GPU alone
        judge._turn({"turn": "exclusive", "enter": False}, held)
        assert _try(path, fcntl.LOCK_SH) and not _try(path, fcntl.LOCK_EX)  # shared again
    assert held == []
    os.close(down_r)
    os.close(down_w)


@pytest.mark.parametrize("hold, let_go", [("work", True), ("yield", False), ("job", False)])
def test_host_work_lets_a_timer_have_the_gpu_only_where_the_turns_say(tmp_path, turns, hold, let_go):
    """A check importing its program or compiling a kernel does no GPU work for seconds: under the default turns
    ("work") it lets go of its shared turn for that; the comparison arms keep it."""
    from klineage.sandbox import host_work

    path = str(tmp_path / "gpu0.lock")
    turns(path, hold=hold)
    with gpu_turn(exclusive=False):
        with host_work():
            assert _try(path, fcntl.LOCK_EX) is let_go
        assert lock_mode_job(path) == "shared"  # taken back after
    with gpu_turn(exclusive=True), host_work():  # a compile inside a measurement keeps the GPU alone
        assert lock_mode_job(path) == "exclusive"


def test_a_section_inside_a_let_go_section_changes_nothing(tmp_path, turns):
    """An import that compiles, a compile inside an off_gpu section: the turn is let go once and taken back once,
    when the outer section ends; a yield inside has no turn to yield; a measurement inside still has the GPU alone."""
    from klineage.sandbox import host_work

    path = str(tmp_path / "gpu0.lock")
    turns(path)
    with gpu_turn(exclusive=False):
        with host_work():
            with off_gpu():
                assert _try(path, fcntl.LOCK_EX)
            assert _try(path, fcntl.LOCK_EX)  # the inner section's end took nothing back
            yield_turn()
            with exclusive_turn():
                assert lock_mode_job(path) == "exclusive"
            assert _try(path, fcntl.LOCK_EX)
        assert lock_mode_job(path) == "shared"


def test_a_candidate_asks_for_host_work_only_outside_every_turn_it_holds(tmp_path, turns):
    """In a candidate process host_work goes through the judge, once for the outermost section: a compile inside
    an import or inside the autotuner's exclusive turn asks nothing (the judge would have nothing to let go, and
    each request would count against the turns a candidate may hold at once). The judge honours a "host" request."""
    import os

    from klineage import sandbox
    from klineage.gates.candidate import Candidate
    from klineage.sandbox import host_work

    asked = []
    sandbox.broker_turns(lambda kind, entering: asked.append((kind, entering)))
    try:
        with host_work(), host_work():
            pass
        with exclusive_turn(), host_work():
            pass
    finally:
        sandbox._broker.clear()
    assert asked == [("host", True), ("host", False), ("exclusive", True), ("exclusive", False)]

    path = tmp_path / "gpu0.lock"
    turns(path)
    down_r, down_w = os.pipe()
    judge = Candidate(0, down_w, down_r, tmp_path)
    held: list = []
    with gpu_turn(exclusive=False):
        judge._turn({"turn": "host", "enter": True}, held)
        assert _try(path, fcntl.LOCK_EX)  # the candidate's import or compile: the GPU is free for a timer
        judge._turn({"turn": "host", "enter": False}, held)
        assert lock_mode_job(path) == "shared"
    assert held == []
    os.close(down_r)
    os.close(down_w)


def test_the_candidate_imports_its_program_and_compiles_as_host_work(tmp_path, monkeypatch):
    """On a GPU the candidate imports its program at the judge's hello, inside host_work (so the request reaches the
    judge, which is reading by then), and every Triton compile runs inside host_work too (a patched
    JITFunction._do_compile, what a launch calls on a cache miss)."""
    from triton.runtime.jit import JITFunction

    from klineage import sandbox
    from klineage.gates import candidate
    from klineage.program import load_program

    (tmp_path / "prog.py").write_text(
        "from klineage import sandbox\n\nASKED_AT_IMPORT = list(sandbox._asked)\n\n\nclass ModelNew:\n    pass\n"
    )
    spec = candidate.Spec(load_program(tmp_path / "prog.py"), "cuda", guard_bytes=0, autotune_picks=False)
    asked = []
    sandbox.broker_turns(lambda kind, entering: asked.append((kind, entering)))
    monkeypatch.setattr(JITFunction, "_do_compile", lambda self, *a: list(sandbox._asked))
    try:
        served = candidate._Served(spec, report=None)
        assert served.module is None and asked == []  # nothing imported before the judge's first request
        served.report = type("Report", (), {"to_json": lambda self: {}, "describe": lambda self: ""})()
        served.answer("hello", None)
        assert served.module.ASKED_AT_IMPORT == ["host"] and asked == [("host", True), ("host", False)]
        candidate._compiles_as_host_work()
        candidate._compiles_as_host_work()  # once is enough: not wrapped twice
        assert JITFunction._do_compile(None) == ["host"]
    finally:
        sandbox._broker.clear()
    assert asked[2:] == [("host", True), ("host", False)]


def test_two_host_sections_beside_each_other_keep_the_turn_let_go_until_the_last_ends(tmp_path, request):
    """A judge serving its candidate's and its reference's imports at once (candidate.greet_together) is in two host
    sections that need not end in the order they began: the turn stays let go until the last one ends, so a timer
    never waits for the import still running, and it is taken back then."""
    from klineage.sandbox import GpuTurns, gpu_turn, host_work, take_turns

    path = str(tmp_path / "gpu0.lock")
    take_turns(GpuTurns(path))
    request.addfinalizer(lambda: take_turns(GpuTurns()))
    with gpu_turn(exclusive=False):  # the job's shared turn, as a judge holds it
        assert lock_mode_job(path) == "shared"
        candidate, reference = host_work(), host_work()
        candidate.__enter__()
        reference.__enter__()
        assert lock_mode_job(path) == "none"
        candidate.__exit__(None, None, None)  # the candidate imported first; the reference still imports
        assert lock_mode_job(path) == "none"
        reference.__exit__(None, None, None)
        assert lock_mode_job(path) == "shared"
        with host_work():  # nested as before: taken back once, after the outer one
            with host_work():
                assert lock_mode_job(path) == "none"
            assert lock_mode_job(path) == "none"
        assert lock_mode_job(path) == "shared"
    assert lock_mode_job(path) == "none"
