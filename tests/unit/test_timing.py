"""The timer's bookkeeping, on a fake device clock (no GPU here): the events around the call are what is timed, the
flush queued in front of it is not, and the host clock has the flush taken off."""

import pytest
import torch

from klineage import timing


class Clock:
    now = 0.0  # milliseconds of fake device time


class FakeEvent:
    def __init__(self, enable_timing: bool = False):
        self.at = None

    def record(self):
        self.at = Clock.now

    def elapsed_time(self, later: "FakeEvent") -> float:
        return later.at - self.at


class FakeFlush:
    def zero_(self):
        Clock.now += 5.0  # a flush much longer than the calls: it must not count


def test_events_time_the_call_not_the_flush_queued_before_it(monkeypatch):
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch, "empty", lambda *a, **k: FakeFlush())

    def work(ms):
        def call():
            Clock.now += ms

        return call

    fast, slow = timing.time_calls([work(2.0), work(3.0)], warmup_ms=0.0, rep_ms=0.0, min_reps=7)
    assert (fast.median_ms, slow.median_ms) == (2.0, 3.0) and fast.reps == 7
    assert fast.spread == 0.0
    # the host clock ran for a few microseconds of real time; the 5 ms of fake flush came off it
    assert -5.0 < fast.wall_median_ms < -4.0


def test_first_calls_compile_beside_other_jobs_and_only_an_autotuner_takes_the_gpu_alone(
    monkeypatch, tmp_path, request
):
    from triton.runtime import autotuner

    from klineage.sandbox import GpuTurns, take_turns
    from tests.unit.test_gpu_lock import lock_mode_job

    path = str(tmp_path / "gpu0.lock")
    take_turns(GpuTurns(path))  # as a job's child on a shared GPU
    request.addfinalizer(lambda: take_turns(GpuTurns()))
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch, "empty", lambda *a, **k: FakeFlush())
    seen = []

    def autotuned_run(self):
        seen.append(("autotuner", lock_mode_job(path)))

    monkeypatch.setattr(autotuner.Autotuner, "run", autotuned_run)

    def call():
        seen.append(("call", lock_mode_job(path)))
        if len(seen) == 1:  # the first call of a program whose kernel autotunes
            autotuner.Autotuner.run(object())
        Clock.now += 1.0

    (t,) = timing.time_calls([call], warmup_ms=0.0, rep_ms=0.0, min_reps=3)
    # the first call ran beside other jobs; its autotuner's benchmarks and the measured calls had the GPU alone
    assert seen[:2] == [("call", "none"), ("autotuner", "exclusive")]
    assert len(seen) > 3 and all(mode == "exclusive" for _, mode in seen[2:])
    assert autotuner.Autotuner.run is autotuned_run and t.median_ms == 1.0 and t.first_calls_s >= 0.0

    seen.clear()
    timing.time_calls([call], warmup_ms=0.0, rep_ms=0.0, min_reps=3, first_calls_alone=True)
    assert seen[0] == ("call", "exclusive")


def test_a_library_autotuner_that_overrides_run_takes_the_gpu_alone_too(monkeypatch, tmp_path, request):
    """FlagGems's LibTuner and fla's CachedAutotuner define their own `run` (LibTuner's never calls Triton's): the
    benchmarks in it must take the GPU alone like Triton's, and the class gets its own `run` back after."""
    from triton.runtime import autotuner

    from klineage.sandbox import GpuTurns, take_turns
    from tests.unit.test_gpu_lock import lock_mode_job

    path = str(tmp_path / "gpu0.lock")
    take_turns(GpuTurns(path))
    request.addfinalizer(lambda: take_turns(GpuTurns()))
    seen = []

    class LibraryTuner(autotuner.Autotuner):
        def __init__(self):  # no kernel behind it: only `run` is exercised
            pass

        def run(self, *args, **kwargs):
            seen.append(("library", lock_mode_job(path)))

    class Derived(LibraryTuner):  # inherits the library's run: wrapped once, through LibraryTuner
        pass

    own = LibraryTuner.__dict__["run"]
    with timing.autotuners_alone():
        LibraryTuner().run()
        Derived().run()
    LibraryTuner().run()
    assert seen == [("library", "exclusive"), ("library", "exclusive"), ("library", "none")]
    assert LibraryTuner.__dict__["run"] is own and "run" not in Derived.__dict__


def test_settled_tuners_see_a_library_autotuner_run():
    from triton.runtime import autotuner

    from klineage.gates.autotune import SettledTuners

    class LibraryTuner(autotuner.Autotuner):
        def __init__(self):
            self.cache, self.configs = {}, []

        def run(self, *args, **kwargs):
            return "ran"

    tuners = SettledTuners()
    one = LibraryTuner()
    with tuners.side("start"):
        assert one.run() == "ran"
    assert tuners.sides["start"] == [one]


def test_a_call_whose_key_is_chosen_compiles_nothing_more_and_shares_the_gpu(monkeypatch, tmp_path, request):
    """A pair's parent given its earlier choice (gates.autotune.SettledTuners) benchmarks nothing: compiling every
    configuration first and taking the GPU alone undid the choice (FlagGems's addmv settled 17-33 s a pair with
    both sides pinned, H100). A key not chosen compiles them all first and benchmarks alone, as before."""
    from triton.runtime import autotuner

    from klineage.sandbox import GpuTurns, take_turns
    from tests.unit.test_gpu_lock import lock_mode_job

    path = str(tmp_path / "gpu0.lock")
    take_turns(GpuTurns(path))
    request.addfinalizer(lambda: take_turns(GpuTurns()))
    seen, compiled = [], []
    monkeypatch.setattr(timing, "_compile_configs", lambda tuner, args, kwargs: compiled.append(args))
    monkeypatch.setattr("klineage.sandbox.lets_go_for_host_work", lambda: True)

    class Tuner(autotuner.Autotuner):
        def __init__(self, cache):  # no kernel behind it: the key and the cache are what is read
            self.arg_names, self.keys, self.configs, self.cache = ["x", "n"], ["n"], ["A", "B"], cache

        def run(self, *args, **kwargs):
            seen.append(lock_mode_job(path))

    x = torch.empty(4)
    with timing.autotuners_alone():
        Tuner({(4, "torch.float32"): "B"}).run(x, 4)  # chosen: the key Triton's run makes, dtype and all
        Tuner({(8, "torch.float32"): "B"}).run(x, 4)  # another key chosen, not this one
    assert seen == ["none", "exclusive"] and len(compiled) == 1


def test_a_library_tuners_own_key_is_read_for_the_chosen_key():
    from triton.runtime import autotuner

    class LibraryTuner(autotuner.Autotuner):
        def __init__(self):
            self.arg_names, self.keys, self.configs, self.cache = ["x", "n"], ["n"], ["A", "B"], {("n=64",): "A"}

        def get_key(self, args):  # a strategy on the key, as FlagGems's LibTuner rounds it up
            return (f"n={2 ** (args['n'] - 1).bit_length()}",)

    assert timing._chosen_already(LibraryTuner(), (None, 50), {})
    assert not timing._chosen_already(LibraryTuner(), (None, 100), {})
    single = LibraryTuner()
    single.configs = ["A"]  # one config: a library's own run may still do anything; left as before
    assert not timing._chosen_already(single, (None, 50), {})


class Host:
    now = 0.0  # seconds of fake host time


def _launching(monkeypatch, flush_ms: float) -> list:
    """The fake device of this file with a fake host clock, a flush of `flush_ms` and a spin kernel of 1e6 cycles a
    millisecond; returns what was queued on the device, in order."""
    queued: list = []

    class Flush:
        def zero_(self):
            queued.append(("flush", flush_ms))
            Clock.now += flush_ms

    def sleep(cycles):
        queued.append(("wait", cycles / 1e6))
        Clock.now += cycles / 1e6

    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "_sleep", sleep, raising=False)
    monkeypatch.setattr(torch, "empty", lambda *a, **k: Flush())
    monkeypatch.setattr(timing.time, "perf_counter", lambda: Host.now)
    return queued


def _call(queued: list, host_ms, device_ms: float):
    """A call that takes host_ms() of host time to queue and device_ms of device time."""

    def call():
        Host.now += host_ms() / 1e3
        queued.append(("call", device_ms))
        Clock.now += device_ms

    return call


def test_a_call_slow_to_queue_gets_a_device_wait_in_front_that_is_not_timed(monkeypatch):
    """A library's wrapper can take longer to queue its kernel than the flush takes to run: the GPU then idled after
    `begin` until the launch came, and a loaded host made that idle time vary (addmm's pipelining read x1.034 with a
    spread of 32.8% beside 14 bench shards, RESULTS.md#wild-13). The wait is 1.5 times the warm-up's p90 queueing
    time, queued after the flush and before `begin`; a call that queues fast gets none."""
    queued = _launching(monkeypatch, flush_ms=0.1)
    slow, fast = _call(queued, lambda: 0.4, 2.0), _call(queued, lambda: 0.01, 3.0)
    a, b = timing._time_calls([slow, fast], warmup_ms=0.0, rep_ms=0.0, min_reps=5)
    timed = queued[queued.index(("flush", 0.1)) :]  # the repetitions, after the warm-up and the calibration
    wait = ("wait", pytest.approx(0.6, abs=1e-3))
    assert timed[:5] == [("flush", 0.1), wait, ("call", 2.0), ("flush", 0.1), ("call", 3.0)]
    assert (a.median_ms, b.median_ms) == (2.0, 3.0)  # the wait is in front of `begin`: not timed
    assert a.host_launch_ms == pytest.approx(0.4) and b.host_launch_ms == pytest.approx(0.01)
    assert a.launch_bound == 0.0 and b.launch_bound == 0.0  # flush and wait outlast the queueing


def test_a_host_that_slows_after_the_warm_up_grows_the_wait_and_the_share_says_so(monkeypatch):
    """A host that became slower after the warm-up (other shards' compiles started): the wait sized in the warm-up
    (0.15 ms) is too short for the first slow repetition, which the timing counts; the wait then grows to 1.5 times
    that repetition's queueing, and the later slow ones are not launch-bound."""
    queued = _launching(monkeypatch, flush_ms=0.01)
    host = iter([0.1] * 3 + [0.5] * 4 + [0.1] * 100)  # the warm-up's 3 rounds, then 4 of 8 repetitions slower
    (t,) = timing._time_calls([_call(queued, lambda: next(host), 1.0)], warmup_ms=0.0, rep_ms=0.0, min_reps=8)
    assert t.launch_bound == 1 / 8 and t.host_launch_ms == pytest.approx(0.3)
    waits = [ms for what, ms in queued if what == "wait"][2:]  # after the calibration's two
    assert waits[0] == pytest.approx(0.15, abs=1e-3) and waits[1:] == [pytest.approx(0.75, abs=1e-3)] * 7
