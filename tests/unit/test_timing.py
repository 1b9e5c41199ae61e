"""The timer's bookkeeping, on a fake device clock (no GPU here): the events around the call are what is timed, the
flush queued in front of it is not, and the host clock has the flush taken off."""

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
