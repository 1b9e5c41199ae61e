"""GPU timing, used inside the sandbox: device events around each call, device-wide synchronization, the L2 flushed
before every repetition, warm-up, many repetitions, rotated inputs, median with spread. Also the ceilings (copy
bandwidth, matmul rate) that achieved throughput is compared with, measured on the device itself.

Nothing here runs without a GPU; the gates say so instead of inventing a figure."""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace

FLUSH_BYTES = 512 * 2**20  # well over the H200's 60 MB L2 (and any current GPU's)
# The device waits in front of each timed call (`torch.cuda._sleep`) for LAUNCH_MARGIN times the p90 of the host's
# time to queue that call, measured in the warm-up, where that is over LAUNCH_WAIT_FROM_MS; never over
# LAUNCH_WAIT_MAX_MS (a call that waits on the device itself queues for as long as the device works).
LAUNCH_MARGIN = 1.5
LAUNCH_WAIT_FROM_MS = 0.05
LAUNCH_WAIT_MAX_MS = 2.0


@dataclass(frozen=True)
class Timing:
    """Milliseconds per call over `reps` repetitions."""

    median_ms: float
    p20_ms: float
    p80_ms: float
    min_ms: float
    max_ms: float
    reps: int
    wall_median_ms: float  # host clock around call + device sync: catches work the events cannot see
    turn_wait_s: float = 0.0  # seconds waited for the GPU alone (other jobs' measurements on a shared GPU)
    turn_held_s: float = 0.0  # seconds the measured section had it alone: warm-up, repetitions (first calls if alone)
    first_calls_s: float = 0.0  # seconds the first calls took beside other jobs (compiling, an autotuner's turn)
    host_launch_ms: float = 0.0  # median host time to queue one call (its Python path, a wrapper, the launches)
    launch_bound: float = 0.0  # share of repetitions whose queueing outlasted the device's wait in front of them

    @property
    def spread(self) -> float:
        """Relative half-width of the p20-p80 band: the noise a difference must exceed."""
        return (self.p80_ms - self.p20_ms) / (2 * self.median_ms) if self.median_ms else 0.0

    def as_dict(self) -> dict:
        return {**asdict(self), "spread": self.spread}


# a Timing's launch figures, which a timed pair reports per side (gates.profile.profile_pair_job)
LAUNCH_FIGURES = ("host_launch_ms", "launch_bound")


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo, hi = int(pos), min(int(pos) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def time_calls(
    calls: Sequence[Callable[[], object]],
    warmup_ms: float = 25.0,
    rep_ms: float = 200.0,
    min_reps: int = 30,
    first_calls_alone: bool = False,
) -> list[Timing]:
    """Time several callables interleaved (A B A B ...) so slow drifts of the machine hit all of them alike.
    Each callable cycles through its own input sets internally; each repetition flushes L2 first. On a GPU shared
    with other jobs the measured section runs with the GPU to itself (sandbox.exclusive_turn); the caller's setup
    does not, and neither do the first calls, which compile: they run beside other jobs' checks, and only an
    autotuner's benchmarks among them take the GPU alone (`autotuners_alone`): another job's check may run while
    this one compiles, and a timer waiting for the GPU alone need not wait for it. `first_calls_alone` puts them
    back inside, for calls whose first run benchmarks by other means than Triton's autotuner. On one H200 with 12
    bench shards the first calls took 0.5-0.6 s (median) beside other jobs; the measured section took 0.28-1 s in
    25 of 60 timings, counted with the wait to take the shared turn back that `turn_held_s` then included
    (RESULTS.md#run-17)."""
    from klineage.sandbox import exclusive_turn

    first = time.perf_counter()
    if not first_calls_alone:
        with autotuners_alone():
            _first_calls(calls)
    asked = time.perf_counter()
    with exclusive_turn():
        got = time.perf_counter()
        if first_calls_alone:
            _first_calls(calls)
        timings = _time_calls(calls, warmup_ms, rep_ms, min_reps)
        held = time.perf_counter() - got  # inside: leaving waits for the shared turn again, which is not holding
    first_s = asked - first if not first_calls_alone else 0.0
    return [replace(t, turn_wait_s=got - asked, turn_held_s=held, first_calls_s=first_s) for t in timings]


def _first_calls(calls: Sequence[Callable[[], object]]) -> None:
    """One call of each, to completion: Triton compiles (or loads from its cache) and autotunes here, outside the
    numbers."""
    import torch

    for call in calls:
        call()
    torch.cuda.synchronize()


@contextlib.contextmanager
def autotuners_alone() -> Iterator[None]:
    """Within this block, a Triton autotuner's run takes the GPU alone (sandbox.exclusive_turn): its benchmarks pick
    a configuration by time, and another job's kernels inside them would pick a wrong one. Compiling needs no such
    turn: where this process lets go of the GPU for host work (sandbox.lets_go_for_host_work), every configuration
    is compiled first (`_compile_configs`), beside other jobs, and the turn alone holds only the benchmarks; a new
    candidate's autotuned kernel compiled each of its configurations (1-3 s each on the H200) with every other job
    on the GPU waiting. Inside a turn already exclusive this changes nothing.
    A call whose tuning key is already chosen (tuned before in this process, or given: gates.autotune.SettledTuners)
    benchmarks nothing, so it runs as any call does: no turn alone, and no configuration compiled but the one it
    runs. Compiling every configuration there undid the choice given to a pair's parent: FlagGems's addmv still
    settled for 17-33 s a pair with both sides' choices pinned (H100, RESULTS.md#settle)."""
    from klineage.sandbox import exclusive_turn, lets_go_for_host_work

    def alone(original):
        def run_alone(self, *args, **kwargs):
            if _chosen_already(self, args, kwargs):
                return original(self, *args, **kwargs)
            if lets_go_for_host_work():
                _compile_configs(self, args, kwargs)
            with exclusive_turn():
                return original(self, *args, **kwargs)

        return run_alone

    with autotuner_runs(alone):
        yield


@contextlib.contextmanager
def autotuner_runs(wrap: Callable[[Callable], Callable]) -> Iterator[None]:
    """Within this block, the `run` of Triton's `Autotuner` and of every loaded subclass that defines its own is
    `wrap(run)`. A library's autotuner overrides `run` without calling Triton's: FlagGems's `LibTuner` (its mm, bmm,
    addmm, mv and a dozen reductions of the wild suite) benchmarks its configs in its own `run`, and fla's
    `CachedAutotuner` reads a config directory first; patching `Autotuner.run` alone let their benchmarks run
    beside other jobs (whether that made amax's and min_dim's re-times, both libtuner's, two of the three widest of
    an H100 bench, spreads 0.43 and 0.25, is not measured: RESULTS.md#wild-h100-2). A subclass that calls
    `super().run` runs both wrappers."""
    from triton.runtime import autotuner

    originals = {cls: cls.__dict__["run"] for cls in _autotuner_classes(autotuner.Autotuner)}
    for cls, original in originals.items():
        cls.run = wrap(original)
    try:
        yield
    finally:
        for cls, original in originals.items():
            cls.run = original


@contextlib.contextmanager
def compile_as_host_work() -> Iterator[None]:
    """A `torch.compile`d call's first run (Dynamo, Inductor, its Triton compiles) as host work: the shared GPU turn
    let go (sandbox.host_work), but for Inductor's own autotuning, whose benchmarks pick a kernel configuration by
    time and so take the GPU alone (sandbox.exclusive_turn), as Triton's autotuners do here (`autotuners_alone`).
    Held through the compile, the shared turn stopped every shard: a timer waiting for the GPU alone holds the
    turnstile, so no check starts until the compile ends. On an H100 with 10 bench shards the host's load fell to
    about 1 and the GPU's use to 0 % for the last 6 of 11 minutes while two references jobs compiled PyTorch's op
    (docs/runs/2026-12-06-h100-wild7; the compile as the cause is inferred, not established). What the first run
    launches besides (the compiled program once, milliseconds) may land inside another job's measured section: a
    few of its repetitions, against minutes of every shard waiting."""
    from klineage.sandbox import exclusive_turn, host_work

    try:
        from torch._inductor.runtime.triton_heuristics import CachingAutotuner
    except ImportError:  # an Inductor without it: its benchmarks run in the host-work section as they are
        CachingAutotuner = None
    original = CachingAutotuner.__dict__.get("benchmark_all_configs") if CachingAutotuner is not None else None

    def benchmark_alone(self, *args, **kwargs):
        with exclusive_turn():
            return original(self, *args, **kwargs)

    if original is not None:
        CachingAutotuner.benchmark_all_configs = benchmark_alone
    try:
        with host_work():
            yield
    finally:
        if original is not None:
            CachingAutotuner.benchmark_all_configs = original


def _autotuner_classes(base: type) -> list[type]:
    """`base` and every subclass loaded now (at any depth) that defines `run` itself."""
    out, todo = [base], list(base.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if "run" in cls.__dict__ and cls not in out:
            out.append(cls)
    return out


def _chosen_already(tuner, args: tuple, kwargs: dict) -> bool:
    """Whether the autotuner's run finds this call's tuning key chosen and so benchmarks nothing: the key as Triton's
    `Autotuner.run` makes it (its `keys` among the call's arguments, then every tensor argument's dtype) or as the
    tuner's own `get_key` does (FlagGems's LibTuner), looked up in its `cache` (a given choice is found there:
    gates.autotune). A tuner whose key cannot be made so (a library's own run, a broken call) is not: it tunes
    as before."""
    try:
        if len(tuner.configs) <= 1:
            return False  # Triton's run benchmarks nothing then, but a library's own run may: as before
        named = {k: v for k, v in {**dict(zip(tuner.arg_names, args)), **kwargs}.items() if k in tuner.arg_names}
        if hasattr(tuner, "get_key"):
            key = tuner.get_key(named)
        else:
            key = tuple(named[k] for k in tuner.keys if k in named)
            key += tuple(str(v.dtype) for v in named.values() if hasattr(v, "dtype"))
        return key in tuner.cache
    except Exception:  # whatever the tuner is, the call goes on as it did
        return False


def _compile_configs(tuner, args: tuple, kwargs: dict) -> None:
    """Compile each configuration the autotuner would benchmark (its pruned list), without launching, as Triton's
    own `Autotuner.warmup` does but one configuration at a time: one that does not compile is left to the
    autotuner's benchmark, which scores it as Triton does. A tuned key's next call finds every kernel compiled
    (microseconds)."""
    if len(getattr(tuner, "configs", ())) <= 1:  # one configuration: nothing is benchmarked
        return
    given = {k: v for k, v in kwargs.items() if k != "warmup"}  # a launch's own; warmup() sets it
    tuner.nargs = dict(zip(tuner.arg_names, args))
    try:
        configs = tuner.prune_configs(given)
    except Exception:
        configs = []
    for config in configs:
        try:
            tuner.fn.warmup(*args, **given, **config.all_kwargs())
        except Exception:
            continue
    tuner.nargs = None


def _time_calls(calls: Sequence[Callable[[], object]], warmup_ms: float, rep_ms: float, min_reps: int) -> list[Timing]:
    import torch

    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    queued: list[list[float]] = [[] for _ in calls]  # per call, the host's ms to queue it, in the warm-up
    start = time.perf_counter()
    n = 0
    while (time.perf_counter() - start) * 1e3 < warmup_ms or n < 3:
        for i, call in enumerate(calls):
            t = time.perf_counter()
            call()
            queued[i].append((time.perf_counter() - t) * 1e3)
        torch.cuda.synchronize()
        n += 1
    per_round_ms = (time.perf_counter() - start) * 1e3 / n
    reps = max(min_reps, int(rep_ms / max(per_round_ms, 1e-3)))
    reps = min(reps, 10_000)
    waits = _LaunchWaits(queued)
    events = [[] for _ in calls]
    walls = [[] for _ in calls]
    launches = [[] for _ in calls]
    for _ in range(reps):
        for i, call in enumerate(calls):
            flushed, begin, end = (torch.cuda.Event(enable_timing=True) for _ in range(3))
            torch.cuda.synchronize()  # device-wide: the last repetition's work on any stream is over
            t0 = time.perf_counter()
            # The flush is queued ahead of the call, not waited for: while the GPU clears L2 (512 MiB at the 4.07
            # TB/s copy rate measured on the H200 is about 0.13 ms) the host gets the launch queued, so the events
            # time the kernels, not the Python launch path in front of them, as do_bench's back-to-back launches do.
            # Waiting for the flush put a launch's host overhead inside every measurement, which matters for
            # kernels of tens of microseconds; benchmarks/profile_vs_do_bench.py compares the two on such kernels.
            # A call whose host path takes longer than the flush (a library's wrapper and tuner, a busy host) gets
            # a device-side wait after the flush as well (`_LaunchWaits`): without it the GPU sat idle after
            # `begin` until the launch came, and that idle time, which a loaded host makes vary, was timed.
            flushed.record()
            flush.zero_()
            if waits.cycles[i]:
                torch.cuda._sleep(waits.cycles[i])
            begin.record()
            t1 = time.perf_counter()
            call()
            launches[i].append((time.perf_counter() - t1) * 1e3)
            end.record()
            torch.cuda.synchronize()  # device-wide: work on any stream has finished before we read the clock
            walls[i].append((time.perf_counter() - t0) * 1e3)
            events[i].append((flushed, begin, end))
            if launches[i][-1] > flushed.elapsed_time(begin):  # the host slowed since the warm-up: wait longer
                waits.grow(i, launches[i][-1])
    out = []
    for i in range(len(calls)):
        ms = [b.elapsed_time(e) for _, b, e in events[i]]
        # the host clock saw the flush and the wait too: take off what the device spent on them
        ahead = [f.elapsed_time(b) for f, b, _ in events[i]]
        wall = [w - a for w, a in zip(walls[i], ahead)]
        out.append(
            Timing(
                median_ms=statistics.median(ms),
                p20_ms=_quantile(ms, 0.2),
                p80_ms=_quantile(ms, 0.8),
                min_ms=min(ms),
                max_ms=max(ms),
                reps=reps,
                wall_median_ms=statistics.median(wall),
                host_launch_ms=statistics.median(launches[i]),
                # the host still queueing when the device reached `begin`: the GPU waited for it inside the timing
                launch_bound=sum(q > a for q, a in zip(launches[i], ahead)) / len(ahead),
            )
        )
    return out


class _LaunchWaits:
    """Per call, the device-side wait (GPU clock cycles, for `torch.cuda._sleep`) queued in front of it: none where
    the host queued the call in under LAUNCH_WAIT_FROM_MS at p90 in the warm-up, else LAUNCH_MARGIN times that p90;
    a repetition whose queueing outlasted the device's time ahead of `begin` grows it to LAUNCH_MARGIN times that
    repetition's (a host that slowed after the warm-up: other shards' compiles began). Never over
    LAUNCH_WAIT_MAX_MS. The cycles per millisecond are measured once, when a wait is first wanted."""

    def __init__(self, queued: list[list[float]]) -> None:
        self._per_ms: float | None = None
        self.cycles = [0] * len(queued)
        for i, q in enumerate(queued):
            if q and (p90 := _quantile(q, 0.9)) > LAUNCH_WAIT_FROM_MS:
                self.grow(i, p90)

    def grow(self, i: int, queued_ms: float) -> None:
        if self._per_ms is None:
            self._per_ms = _sleep_cycles_per_ms()
        wanted = int(min(LAUNCH_MARGIN * queued_ms, LAUNCH_WAIT_MAX_MS) * self._per_ms)
        self.cycles[i] = max(self.cycles[i], wanted)


def _sleep_cycles_per_ms(cycles: int = 1_000_000) -> float:
    import torch

    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(cycles // 10)  # the first launch of the spin kernel, untimed
    begin.record()
    torch.cuda._sleep(cycles)
    end.record()
    torch.cuda.synchronize()
    return cycles / max(begin.elapsed_time(end), 1e-6)


def measure_ceilings() -> dict:
    """Copy bandwidth (bytes read + written per second) and dense matmul rates, measured here and now."""
    import torch

    results = {"device": torch.cuda.get_device_name(0)}
    n = 2**30
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    (copy,) = time_calls([lambda: dst.copy_(src)], warmup_ms=50, rep_ms=300, min_reps=20)
    results["copy_bytes_per_s"] = 2 * n / (copy.median_ms * 1e-3)
    src = dst = None  # free 2 GB before the matmuls
    size = 8192
    for dtype, key in ((torch.bfloat16, "bf16"), (torch.float16, "fp16"), (torch.float32, "fp32")):
        a = torch.randn(size, size, device="cuda", dtype=dtype)
        b = torch.randn(size, size, device="cuda", dtype=dtype)
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 ceiling is true fp32, not tf32
        try:
            (mm,) = time_calls([lambda a=a, b=b: torch.mm(a, b)], warmup_ms=100, rep_ms=500, min_reps=10)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous
        results[f"matmul_{key}_flops_per_s"] = 2 * size**3 / (mm.median_ms * 1e-3)
    torch.cuda.empty_cache()
    return results


def roofline(flops: float, nbytes: float, dtype: str, ceilings: dict) -> dict:
    """The time floor of a case and which resource sets it."""
    key = {"bfloat16": "bf16", "float16": "fp16"}.get(dtype, "fp32")
    peak = ceilings.get(f"matmul_{key}_flops_per_s") or ceilings.get("matmul_bf16_flops_per_s")
    bw = ceilings["copy_bytes_per_s"]
    t_flops, t_bytes = flops / peak, nbytes / bw
    return {"floor_ms": max(t_flops, t_bytes) * 1e3, "bound": "compute" if t_flops > t_bytes else "memory"}
