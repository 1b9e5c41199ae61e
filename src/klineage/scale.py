"""Beyond one process: the same tasks (a bench instance, a program to optimize, an expert to mine) scheduled by Dask
distributed over workers on this machine or a running cluster, instead of run one after another here.

The engine is chosen by the user: `Engine()` is the embedded path (nothing here runs, the caller loops as before);
`Engine(workers=N)` starts a local cluster of N worker processes (one thread each: a worker is one judge with its
own sandbox); `Engine(scheduler=ADDRESS)` uses a running cluster (`dask scheduler` + `dask worker`, dask-jobqueue,
dask-kubernetes: docs/scale.md). A task that needs a GPU requires the resource `GPU: 1`, and a GPU worker offers
exactly one, so two timing tasks never share a GPU. Locally each GPU worker sees only its own GPU
(CUDA_VISIBLE_DEVICES set in its environment by its nanny); `cpu_workers` more offer no GPU and take only the
tasks that need none (a walk gated through Triton's interpreter). A task may follow another (`Task.after`): it
starts once that one has ended, with its value as first argument.

Fault tolerance is Dask's: a worker that dies mid-task (killed, out of memory, its node lost) has its task rerun on
another worker, up to `distributed.scheduler.allowed-failures` times (3 by default); a task that raises runs once
more (`retries`). Every attempt logs an event on the scheduler when it starts, so the caller learns which tasks ran
more than once (`Outcome.attempts`) without a shared file system. Results flow back to the client, which alone
writes reports and libraries (the judge owns writes); the verdict cache is SQLite, whose locking serializes the
workers' short writes (cache.Store, a 30 s busy timeout)."""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from klineage.workload import UserError

TOPIC = "klineage-attempt"  # the scheduler's event topic every attempt logs to when it starts


@dataclass(frozen=True)
class Engine:
    """Where tasks run: the embedded single process (neither given), a local cluster of `workers` processes, or the
    running cluster at `scheduler` (an address such as tcp://host:8786)."""

    scheduler: str = ""
    workers: int = 0
    cpu_workers: int = 0  # local workers besides `workers` that offer no GPU (tasks that need none)

    @property
    def embedded(self) -> bool:
        return not self.scheduler and not self.workers

    @staticmethod
    def of(scheduler: str | None, workers: int | None, cpu_workers: int | None = None) -> Engine:
        """From the CLI's --scheduler, --workers and --cpu-workers: a running cluster, or a local one of a positive
        count (and as many CPU workers more), or neither. A running cluster has the workers it was given."""
        if scheduler and workers:
            raise UserError("--scheduler and --workers both choose the cluster: give one")
        if workers is not None and workers < 1:
            raise UserError(f"--workers {workers}: expected a positive number of worker processes")
        if cpu_workers:
            if cpu_workers < 0:
                raise UserError(f"--cpu-workers {cpu_workers}: expected a number of worker processes")
            if scheduler or not workers:
                # a running cluster's CPU workers are started with it (docs/scale.md); alone they would time nothing
                raise UserError("--cpu-workers adds CPU-only workers to a local cluster: give --workers N with it")
        return Engine(scheduler or "", workers or 0, cpu_workers or 0)

    @property
    def local_workers(self) -> int:
        """How many worker processes a local cluster starts: the GPU (or plain) workers and the CPU-only ones."""
        return self.workers + self.cpu_workers


@dataclass(frozen=True)
class Outcome:
    """One task's end: its value, or why it has none (`error`: it raised on every try, or it killed a worker on
    every try: Dask's KilledWorker). `attempts`: how many times it started (more than one: retried); `workers`:
    where each attempt ran."""

    name: str
    value: Any = None
    error: str = ""
    attempts: int = 1
    workers: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.error


@dataclass(frozen=True)
class Task:
    """One task of a run: `function(*args)` on a worker; with `gpu`, on one that offers the GPU resource (it
    times). With `after`, the name of an earlier task of the same run: this one starts once that one has ended, and
    gets its value as first argument (a walk made on a CPU worker, then timed on a GPU worker)."""

    function: Callable
    args: tuple = ()
    gpu: bool = False
    after: str = ""

    @property
    def resources(self) -> dict[str, int] | None:
        return {"GPU": 1} if self.gpu else None


@dataclass(frozen=True)
class Attempt:
    """An attempt's start, as its event says: which task, where, in which process (a test kills it there)."""

    run: str
    task: str
    worker: str
    pid: int


def visible_gpus() -> list[str]:
    """The GPUs this machine shows, as CUDA_VISIBLE_DEVICES names them (or as nvidia-smi counts them), without
    importing torch or touching CUDA in this process."""
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given is not None:
        return [g.strip() for g in given.split(",") if g.strip() and g.strip() != "-1"]
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(out.stdout.splitlines()) if line.startswith("GPU ")]


def _local_spec(workers: int, gpu: bool, cpu_workers: int = 0) -> dict:
    """One nanny-kept worker process per entry, one thread each. With `gpu`, worker i sees only the i-th visible
    GPU and offers it as the resource GPU=1; there may not be more workers than GPUs (two would share one). The
    `cpu_workers` more see no GPU (CUDA_VISIBLE_DEVICES empty) and offer none: a task that times never goes there."""
    from distributed import Nanny

    gpus = visible_gpus() if gpu else []
    if gpu and workers > len(gpus):
        raise UserError(f"--workers {workers}: this machine shows {len(gpus)} GPU(s); at most one worker per GPU")
    spec = {}
    # memory_limit 0: the nanny must not kill a worker for memory its sandbox children hold (they have limits)
    base: dict = {"nthreads": 1, "memory_limit": 0, "silence_logs": 40}
    for i in range(workers):
        options = dict(base)
        if gpu:
            options |= {"resources": {"GPU": 1}, "env": {"CUDA_VISIBLE_DEVICES": gpus[i]}}
        spec[f"klineage-{i}"] = {"cls": Nanny, "options": options}
    for i in range(cpu_workers):
        # hidden from every GPU, so an interpreter job there never opens a CUDA context on a GPU worker's card
        spec[f"klineage-cpu-{i}"] = {"cls": Nanny, "options": base | {"env": {"CUDA_VISIBLE_DEVICES": ""}}}
    return spec


@contextlib.contextmanager
def cluster(engine: Engine, gpu: bool) -> Iterator[Any]:
    """A distributed Client on the engine's cluster: started here (and stopped after) for `workers`, connected to
    for `scheduler`. With `gpu`, a running cluster must have a worker offering the GPU resource, or nothing would
    ever run: said at once."""
    try:
        from distributed import Client, Scheduler, SpecCluster
    except ImportError:
        raise UserError(
            "--workers/--scheduler need Dask distributed: pip install 'klineage[scale]' (docs/scale.md)"
        ) from None
    if engine.embedded:
        raise ValueError("the embedded engine runs no cluster")
    if engine.scheduler:
        try:
            client = Client(engine.scheduler, timeout="30s")
        except OSError as e:
            raise UserError(f"--scheduler {engine.scheduler}: no scheduler answered ({e})") from None
        with client:
            if gpu and not any(w.get("resources", {}).get("GPU") for w in _workers(client).values()):
                raise UserError(
                    f"--scheduler {engine.scheduler}: no worker offers a GPU; start one per GPU with "
                    "`dask worker ADDRESS --nthreads 1 --resources GPU=1` (docs/scale.md)"
                )
            yield client
        return
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": ":0"}}
    spec = _local_spec(engine.workers, gpu, engine.cpu_workers)
    with SpecCluster(workers=spec, scheduler=scheduler, silence_logs=40) as local:
        with Client(local) as client:
            client.wait_for_workers(engine.local_workers, timeout=120)
            yield client


def _workers(client) -> dict:
    """Every worker the scheduler knows, by address: some versions list only the first five unless asked for all."""
    try:
        return client.scheduler_info(n_workers=-1).get("workers", {})
    except TypeError:  # a version without the argument lists them all
        return client.scheduler_info().get("workers", {})


def dashboard(client) -> str:
    """The dashboard's address ("" where the scheduler serves none). Its pages need bokeh where the scheduler runs
    (not a dependency here: it brings pandas and more); a local one without it is said beside the address."""
    import importlib.util

    try:
        link = client.dashboard_link or ""
    except Exception:  # a scheduler that serves no dashboard: no link, the run goes on
        return ""
    if link and getattr(client.cluster, "scheduler", None) and importlib.util.find_spec("bokeh") is None:
        link += " (its pages need bokeh: pip install bokeh)"
    return link


def _attempt(function: Callable, run: str, name: str, args: tuple) -> Any:
    """One attempt of a task on a worker: its start logged on the scheduler first (Attempt), then the task."""
    from distributed import get_worker

    worker = get_worker()
    worker.log_event(TOPIC, {"run": run, "task": name, "worker": worker.address, "pid": os.getpid()})
    return function(*args)


def run_tasks(
    client,
    function: Callable,
    tasks: dict[str, tuple],
    gpu: bool = False,
    on_done: Callable[[Outcome], None] | None = None,
    on_start: Callable[[Attempt], None] | None = None,
) -> dict[str, Outcome]:
    """`function(*args)` for each (name, args) of `tasks` on the cluster, a GPU each with `gpu`: run_graph's
    tasks that all do the same and follow none."""
    return run_graph(client, {name: Task(function, args, gpu) for name, args in tasks.items()}, on_done, on_start)


def submission(task: Task, run: str, name: str, futures: dict[str, Any]) -> tuple[tuple, dict]:
    """What `client.submit` gets for `task` (args, keywords): the attempt wrapper, the task's function and
    arguments (after the future of the task it follows, which Dask resolves to that task's value on the worker and
    waits for), its resources. One retry: a task that raises runs once more."""
    args = (futures[task.after], *task.args) if task.after else task.args
    keywords = {"key": f"{name}-{run}", "pure": False, "retries": 1, "resources": task.resources}
    return (_attempt, task.function, run, name, args), keywords


def run_graph(
    client,
    tasks: dict[str, Task],
    on_done: Callable[[Outcome], None] | None = None,
    on_start: Callable[[Attempt], None] | None = None,
) -> dict[str, Outcome]:
    """Each task of `tasks` on the cluster, those that follow another after it; per name, its Outcome, in the order
    `tasks` gave them. `on_done` gets each outcome as it ends (in the order they end: a report written there keeps
    what finished), `on_start` each attempt as the scheduler hears of it. A task whose predecessor failed on every
    try fails with that error, without running."""
    from distributed import as_completed

    earlier: set[str] = set()
    for name, task in tasks.items():
        if task.after and task.after not in earlier:
            raise ValueError(f"task {name} follows {task.after!r}, not an earlier task of the run")
        earlier.add(name)
    run = uuid.uuid4().hex[:12]
    seen: dict[str, list[str]] = {name: [] for name in tasks}
    lock = threading.Lock()

    def heard(event) -> None:
        _, msg = event
        if not isinstance(msg, dict) or msg.get("run") != run:
            return
        with lock:
            seen.setdefault(msg["task"], []).append(msg["worker"])
        if on_start:
            on_start(Attempt(run, msg["task"], msg["worker"], int(msg["pid"])))

    client.subscribe_topic(TOPIC, heard)
    by_name: dict[str, Any] = {}
    for name, task in tasks.items():
        args, keywords = submission(task, run, name, by_name)
        by_name[name] = client.submit(*args, **keywords)
    futures = {future: name for name, future in by_name.items()}
    outcomes: dict[str, Outcome] = {}
    try:
        for future in as_completed(list(futures)):
            name = futures[future]
            if future.status == "finished":
                value, error = future.result(), ""
            else:
                value, error = None, f"{type(future.exception()).__name__}: {future.exception()}"
            where = _attempts(client, run, name, seen, lock)
            outcomes[name] = Outcome(name, value, error, max(1, len(where)), tuple(where))
            # the scheduler keeps a value a later task still needs (and can make it again), released here or not
            future.release()
            if on_done:
                on_done(outcomes[name])
    finally:
        client.unsubscribe_topic(TOPIC)
    return {name: outcomes[name] for name in tasks}


def _attempts(client, run: str, name: str, seen: dict, lock: threading.Lock) -> list[str]:
    """Where each attempt of `name` ran: the scheduler's record of the run's events (what a subscription may not
    have delivered yet), else what the subscription heard."""
    try:
        logged = [m["worker"] for _, m in client.get_events(TOPIC) if m.get("run") == run and m.get("task") == name]
    except Exception:  # the scheduler's record is an extra: what the subscription heard stands
        logged = []
    with lock:
        heard = list(seen.get(name, []))
    return logged if len(logged) >= len(heard) else heard


def worker_settings(settings):
    """The settings a task takes to its worker: without the client's GPU lock file (KLINEAGE_GPU_LOCK), which is
    the embedded path's way for processes sharing GPUs to take turns. A worker owns its GPU (one per GPU, the GPU
    resource); a lock named by the client would make every worker on every GPU take turns on one file."""
    return settings.replace(gpu_lock="")


_SANDBOXES: dict[bool, Any] = {}


def worker_sandbox(warm: bool):
    """This worker process's sandbox, made once and closed when the process ends: its warm server pays the torch and
    Triton import once per worker, not once per task."""
    from klineage.sandbox import Sandbox

    if warm not in _SANDBOXES:
        _SANDBOXES[warm] = Sandbox(warm=warm)
        atexit.register(_SANDBOXES[warm].close)
    return _SANDBOXES[warm]


@dataclass(frozen=True)
class EngineReport:
    """How many tasks ran more than once, and which failed on every try: what a report says of its engine."""

    engine: str
    workers: int
    retried: dict[str, int] = field(default_factory=dict)  # task name -> attempts
    failed: dict[str, str] = field(default_factory=dict)  # task name -> why

    def as_dict(self) -> dict:
        return {"engine": self.engine, "workers": self.workers, "retried": self.retried, "failed": self.failed}


def engine_report(client, engine: Engine, outcomes: list[Outcome]) -> EngineReport:
    """The engine's part of a report: where it ran, with how many workers, what was retried and what failed."""
    where = f"the scheduler at {engine.scheduler}" if engine.scheduler else "a local cluster"
    workers = len(_workers(client))
    return EngineReport(
        where,
        workers,
        {o.name: o.attempts for o in outcomes if o.attempts > 1},
        {o.name: o.error for o in outcomes if not o.ok},
    )
