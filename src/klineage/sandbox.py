"""Every evaluation in its own process, with a time limit. A crash (segfault, heap corruption, illegal memory access),
a hang or an out-of-memory comes back as a `SandboxResult` value, and the caller goes on.

Two ways to get a process:
- cold: a fresh `python -m klineage.sandbox` per job (pays the torch and Triton import, about 2-4 s, every time);
- warm: one long-lived server per Sandbox that imported torch and Triton once and forks a child per job. The
  child is still a fresh process for the program (nothing of one candidate survives into the next, no kernel ran
  before it: a first call is a real first call) and its crash only kills itself. If the server itself dies it is
  replaced on the next job. The server never initializes CUDA, so forked children may.

A job is a dotted function name plus a picklable payload; the function runs in the child with `env` applied first,
on the job's device, taking turns on a shared GPU as the job's `turns` say. Program output goes to a log whose tail
is kept as evidence."""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from klineage.outcome import RESULT_LIMIT, parse_result, safe_loads

# address space a CPU job may add to what it starts with: a runaway allocation becomes MemoryError, not an OOM kill.
# On top of the start, not absolute: a CUDA build of torch maps gigabytes of libraries before any job runs, and an
# absolute 16 GiB cap left the matmul expert's CPU compile job on the H200 image unable to allocate 256 MiB
# (RESULTS.md#run-15).
MEMORY_LIMIT_CPU = 16 * 2**30


@dataclass(frozen=True)
class GpuTurns:
    """How the jobs sharing one GPU take turns on it (Settings.gpu_lock, Settings.gpu_turns). `lock` names a lock
    file, one per GPU ("": no turns, the GPU is this process's); `hold`: how long a check holds its shared turn, one
    of config.TURN_HOLDS."""

    lock: str = ""
    hold: str = "work"

    @staticmethod
    def of(settings) -> GpuTurns:
        return GpuTurns(settings.gpu_lock, settings.gpu_turns)


@dataclass(frozen=True)
class Job:
    function: str  # "module:function"
    payload: Any
    env: dict[str, str] = field(default_factory=dict)  # for the child's own libraries (TRITON_INTERPRET)
    timeout_s: float = 300.0
    device: str = "cpu"  # "cuda": the job holds a turn on its GPU; "cpu": its address space is capped
    gpu_alone: bool = False  # the whole job alone on its GPU, not side by side with other jobs' checks
    turns: GpuTurns = GpuTurns()


@dataclass(frozen=True)
class SandboxResult:
    ok: bool  # the function returned a value
    value: Any = None
    error: str = ""  # why there is no value: timeout, crash with signal, exception text
    kind: str = ""  # "", "timeout", "crash", "exception", "oom"
    log: str = ""  # tail of the child's stdout and stderr
    seconds: float = 0.0


def _log_tail(path: str, limit: int = 4000) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError:
        return ""
    return data[-limit:].decode(errors="replace")


def describe_exit(status: int) -> tuple[str, str]:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig == signal.SIGKILL:
            return "crash", f"killed by {name} (out of host memory?)"
        return "crash", f"crashed with {name}"
    return "crash", f"exited with code {os.WEXITSTATUS(status)} before returning a result"


_shared: list = []  # in a job's child: the open lock file through which the job holds its shared turn
_exclusive: list = []  # this process has the GPU alone (a measurement inside it needs nothing more)
_away: list = []  # the sections for which this job's shared turn is let go now (_shared_let_go), one entry each
_let_go: list = []  # the lock files of the shared turn let go, taken back when the last of those sections ends
_turns = [GpuTurns()]  # how this process takes turns: a job's child, as its job says (take_turns)
# in a candidate process (gates.candidate): asks its judge for each turn, ask(kind, entering), instead of taking it on
# the lock file. The judge holds the lock for the whole job and the candidate's copy of it is closed by confinement,
# so the judge must trade its own turn while the candidate's section runs (broker_turns)
_broker: list = []
_asked: list = []  # in a candidate process: the kinds of turn it holds through its judge now, innermost last


def broker_turns(ask) -> None:
    """From now on this process asks `ask(kind, entering)` for its turns ("exclusive", "off", "yield") instead of
    taking them on a lock file: the candidate process's timing then holds the GPU alone exactly as a job's did."""
    _broker[:] = [ask]


@contextlib.contextmanager
def _brokered(kind: str) -> Iterator[None]:
    _quiesce()  # as _shared_let_go: this process's GPU work done before a timer may measure
    _broker[0](kind, True)
    _asked.append(kind)
    try:
        yield
    finally:
        _asked.pop()
        _broker[0](kind, False)


def take_turns(turns: GpuTurns) -> GpuTurns:
    """From now on this process takes turns on its GPU as `turns` say; returns how it took them before. A job's child
    takes its job's; a script that times in its own process, its Settings' (GpuTurns.of)."""
    previous, _turns[0] = _turns[0], turns
    return previous


def device_memory_ran_out(text: str) -> bool:
    """Whether a job's error or log says the GPU's memory ran out (PyTorch's CUDA out-of-memory error)."""
    return "CUDA out of memory" in text or "OutOfMemoryError" in text


@contextlib.contextmanager
def gpu_turn(exclusive: bool) -> Iterator[None]:
    """Take turns on a GPU that several processes share, when this process's turns name a lock file (one per GPU):
    jobs that compile and check run side by side (shared), a measurement runs alone (exclusive), so no other job's
    kernels land inside it. A second file is a turnstile: a timer waiting for the checks to drain holds it, so new
    checks queue behind the timer instead of starving it. The kernel drops both locks when their holder dies (a job
    killed at its timeout)."""
    path = _turns[0].lock
    if not path:
        yield
        return
    import fcntl

    with open(path + ".turn", "a") as turn, open(path, "a") as gpu:
        fcntl.flock(turn, fcntl.LOCK_EX)
        try:
            fcntl.flock(gpu, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            if not exclusive:
                fcntl.flock(turn, fcntl.LOCK_UN)
        held = _exclusive if exclusive else _shared
        held.append(gpu)
        try:
            yield
        finally:
            held.remove(gpu)
            fcntl.flock(gpu, fcntl.LOCK_UN)
            if exclusive:
                fcntl.flock(turn, fcntl.LOCK_UN)


@contextlib.contextmanager
def exclusive_turn() -> Iterator[None]:
    """The GPU alone for a measured section of a job that otherwise holds a shared turn (every job on a GPU does,
    see _run_in_child). Only the measurement is exclusive: the job's setup (imports, models, input sets, a
    torch.compile) runs beside other jobs' checks, so a timer holds the GPU for seconds, not for its whole job.
    The shared turn is let go first (two jobs trading up at once would otherwise wait on each other) and taken
    back, through the turnstile, afterwards."""
    if _broker:
        with _brokered("exclusive"):
            yield
        return
    path = _turns[0].lock
    if not path or _exclusive:  # no lock in use, or the caller already has the GPU alone (flock would wait on it)
        yield
        return
    with _shared_let_go(), gpu_turn(exclusive=True):
        yield


@contextlib.contextmanager
def off_gpu() -> Iterator[None]:
    """A section of a job that does no GPU work (disassembling its kernels, say): the shared turn is let go for it,
    so a timer need not wait for it, and taken back after, through the turnstile (behind a waiting timer). A
    no-op outside a shared turn."""
    if _broker:
        with _brokered("off"):
            yield
        return
    if _whole_job_turns():
        yield
        return
    with _shared_let_go():
        yield


@contextlib.contextmanager
def host_work() -> Iterator[None]:
    """A section in which a check's process works on the host only, for seconds: a candidate importing its program
    (FlagGems's import takes seconds), Triton compiling a kernel (1-3 s a specialization on the H200). The shared
    turn is let go for it, as off_gpu's, unless the job's turns hold it there (GpuTurns.hold "job" or "yield", the
    comparison arms). Without it a timer waiting for the GPU alone waits for every check in such a section: on an
    H100 with 8 bench shards the GPU sat idle in 23 of 32 samples (RESULTS.md#h100-starts). In a candidate process
    only the outermost section asks its judge (inside any turn it holds, the judge would have nothing to let go),
    so compiles inside an import or an autotuner's exclusive turn cost no requests and no nesting, and none where
    its judge's turns would keep the turn anyway (its GpuTurns, from the judge's)."""
    if not lets_go_for_host_work() or (_broker and _asked):
        yield
        return
    with _brokered("host") if _broker else _shared_let_go():
        yield


def lets_go_for_host_work() -> bool:
    """Whether this process's turns let go of the GPU for host work (GpuTurns.hold "work", the default): then an
    autotuner also compiles its configurations before it takes the GPU alone (timing.autotuners_alone)."""
    return _turns[0].hold == "work"


@contextlib.contextmanager
def _shared_let_go() -> Iterator[None]:
    """The job's shared turn let go for the block, once its GPU work is done (_quiesce), and taken back after the
    last such block ends, through the turnstile: what exclusive_turn, off_gpu, host_work and yield_turn share. A
    block inside another, or beside it (a judge serving its candidate's and its reference's imports at once,
    candidate.greet_together), counts itself in, and whichever ends last takes the turn back: the first to end
    must not, or a timer would wait for the other's import."""
    path = _turns[0].lock
    if not path or _exclusive or not (_shared or _away):
        yield
        return
    import fcntl

    if not _away:
        _quiesce()
        _let_go[:] = list(_shared)
        for gpu in _let_go:
            fcntl.flock(gpu, fcntl.LOCK_UN)
    _away.append(True)
    try:
        yield
    finally:
        _away.pop()
        if not _away:
            _take_back(path)


def _take_back(path: str) -> None:
    """The shared turn let go by _shared_let_go, taken again through the turnstile (behind a waiting timer)."""
    import fcntl

    with open(path + ".turn", "a") as turn:
        fcntl.flock(turn, fcntl.LOCK_EX)
        for gpu in _let_go:
            fcntl.flock(gpu, fcntl.LOCK_SH)
        fcntl.flock(turn, fcntl.LOCK_UN)
    _let_go.clear()


def _whole_job_turns() -> bool:
    """A check keeps its shared turn for its whole job, as before 00381e5 (GpuTurns.hold "job")."""
    return _turns[0].hold == "job"


def yield_turn() -> None:
    """A point between two pieces of a job's GPU work (two correctness trials, two compile cases) where a timer
    waiting for the GPU alone goes first: the shared turn is let go, the timer measures, the turn is taken back. No
    timer waiting, nothing changes. Without such points a timer waits for every running check to end (whole jobs
    of 10-15 s on one H200 with 12 shards, where a timing job waited 9 s for its turn, median: RESULTS.md#run-17)
    and no new check starts meanwhile. A no-op outside a shared turn."""
    if _broker:
        _quiesce()
        _broker[0]("yield", True)
        return
    path = _turns[0].lock
    if not path or not _shared or _exclusive or _away or _whole_job_turns():
        return
    import fcntl

    with open(path + ".turn", "a") as turn:
        try:
            fcntl.flock(turn, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # a timer holds the turnstile (or a check is passing through it): let it go first
            pass
        else:  # no timer waiting
            fcntl.flock(turn, fcntl.LOCK_UN)
            return
    with _shared_let_go():
        pass


def _quiesce() -> None:
    """This job's GPU work finished, on every stream, before a timer may measure: a program that left kernels
    running on a side stream must not put them inside another program's timing. Nothing to do before CUDA is up."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def address_space_now() -> int:
    """Bytes of address space this process maps (0 where /proc cannot tell)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _run_in_child(job: Job, result_fd: int, log_path: str) -> None:
    """Body of the child process (the judge): run the job, write the pickled outcome to `result_fd`, exit without
    cleanup. The outcome goes down a pipe only this process holds, never a file: a candidate process the job forks
    closes its copy (candidate.py), so what the server reads was written by the judge."""
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    _keep_only((1, 2, result_fd))
    os.environ.update(job.env)
    take_turns(job.turns)
    if job.device == "cpu":
        try:
            import resource

            cap = address_space_now() + MEMORY_LIMIT_CPU
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        except (ValueError, OSError):
            pass
    try:
        module_name, function_name = job.function.split(":")
        module = __import__(module_name, fromlist=[function_name])
        on_gpu = job.device == "cuda"
        # a shared turn, which timing trades up (exclusive_turn); or the whole job alone (gpu_alone: check.py's retry)
        with gpu_turn(exclusive=job.gpu_alone) if on_gpu else contextlib.nullcontext():
            value = getattr(module, function_name)(job.payload)
        outcome = ("ok", value)
    except MemoryError as e:
        outcome = ("oom", f"out of memory: {e}")
    except BaseException as e:  # the child reports everything; the caller decides
        import traceback

        traceback.print_exc()
        outcome = ("exception", f"{type(e).__name__}: {e}")
    try:
        data = pickle.dumps(outcome)
    except Exception as e:  # an unpicklable value is the job's bug, reported as such
        data = pickle.dumps(("exception", f"result not picklable: {e}"))
    sys.stdout.flush()
    sys.stderr.flush()
    _write_all(result_fd, struct.pack("<Q", len(data)) + data)
    os._exit(0)


def _keep_only(keep: tuple[int, ...]) -> None:
    """Close every descriptor but `keep` and point stdin at /dev/null: a job's child inherits the warm server's
    protocol pipes, through which anything running in it could answer the caller in the server's name."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    low = 3
    for fd in sorted(k for k in keep if k >= 3):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 16)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _drain(fd: int) -> bytes:
    """What is left in the child's result pipe, without waiting: a process the child left behind may hold a copy of
    its write end (so no end of file ever comes), and the server must not hang on it."""
    os.set_blocking(fd, False)
    chunks, got = [], 0
    while got <= RESULT_LIMIT + 8:
        try:
            chunk = os.read(fd, 1 << 20)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _collect(outcome, log_path: str, status: int | None, started: float, timed_out: bool) -> SandboxResult:
    seconds = time.perf_counter() - started
    log = _log_tail(log_path)
    if timed_out:
        return SandboxResult(False, error="timed out", kind="timeout", log=log, seconds=seconds)
    if outcome is None:
        kind_, why = describe_exit(status if status is not None else 0)
        return SandboxResult(False, error=why, kind=kind_, log=log, seconds=seconds)
    kind, value = outcome
    if kind == "ok":
        return SandboxResult(True, value=value, log=log, seconds=seconds)
    return SandboxResult(False, error=value, kind=kind, log=log, seconds=seconds)


def _wait(pid: int, timeout_s: float, result_fd: int | None = None) -> tuple[int | None, bool, bytes]:
    """waitpid with a deadline, draining the child's result pipe meanwhile (a result larger than the pipe's buffer
    would otherwise block the child); on timeout kill the child's whole process group."""
    import select

    deadline = time.monotonic() + timeout_s
    delay = 0.002
    data = bytearray()
    while True:
        if result_fd is not None and len(data) <= RESULT_LIMIT + 8:
            while select.select([result_fd], [], [], 0)[0]:
                chunk = os.read(result_fd, 1 << 20)
                if not chunk:
                    break
                data += chunk
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status, False, bytes(data)
        if time.monotonic() > deadline:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            return None, True, bytes(data)
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


# --- the warm server ----------------------------------------------------------------------------------------------


def _serve() -> None:
    """Warm server loop: read length-prefixed pickled (job, result_path, log_path), fork a child per job, reply."""
    proto_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed by imports goes to stderr, never into the protocol
    proto_in = sys.stdin.buffer
    import importlib

    for name in sys.argv[2].split(",") if len(sys.argv) > 2 else ("torch", "triton"):
        importlib.import_module(name)  # paid once: the point of a warm server
    _warm_caches()

    _send(proto_out, "ready")
    while True:
        request = _recv(proto_in)
        if request is None:
            return
        job, _, log_path = request
        started = time.perf_counter()
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.setpgid(0, 0)
            os.close(read_end)
            _run_in_child(job, write_end, log_path)
        os.close(write_end)
        status, timed_out, data = _wait(pid, job.timeout_s, read_end)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)  # nothing the job started outlives it
        data += _drain(read_end)  # what the child wrote just before it exited
        os.close(read_end)
        _send(proto_out, _collect(parse_result(data), log_path, status, started, timed_out))


def _warm_caches() -> None:
    """What every child would otherwise compute again, computed once before the first fork: Triton's key of its own
    install (a hash of its 415 MB libtriton.so and its sources: 0.37-0.40 s a child on the H200 image, 0.32 s here).
    Pure hashing: no CUDA, no threads. Nothing here may initialize CUDA, or no child could use it after the fork."""
    try:
        from triton.runtime.cache import triton_key

        triton_key()
    except Exception:  # another Triton: its children pay as before
        pass


def _send(stream, obj) -> None:
    data = pickle.dumps(obj)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def _recv(stream, safe: bool = False):
    """One message; `safe`: a server's reply, read with the result unpickler (the server is not a candidate's, but
    a reply carries values a job's child made)."""
    header = stream.read(8)
    if len(header) < 8:
        return None
    (size,) = struct.unpack("<Q", header)
    data = stream.read(size)
    return safe_loads(data) if safe else pickle.loads(data)


# Imported by the warm server, so its children inherit them. torch._dynamo: torch's dispatch modes and many torch
# functions import it lazily on their first call (torch._compile), so every child of a server without it imported it
# again: 4.8 s of a 7 s correctness check on the H200 image, whose torch has no bytecode cache (a profile of a forked
# child there, RESULTS.md#run-18; 0.9 s here). Importing it starts no thread and touches no GPU.
PRELOAD = (
    "torch",
    "triton",
    "torch._dynamo",
    "klineage.gates.correctness",
    "klineage.gates.compile",
    "klineage.gates.profile",
    "klineage.guards",
)


class Sandbox:
    """Runs jobs in isolated processes. Use as a context manager so a warm server is shut down."""

    def __init__(self, warm: bool = True, preload: tuple[str, ...] = PRELOAD):
        self.warm = warm
        self.preload = preload
        # one server per interpreter mode: TRITON_INTERPRET must be set before `import triton`, or the standard
        # library's @triton.jit helpers (tl.max, tl.sum...) stay compiled functions the interpreter cannot call
        self._servers: dict[str, subprocess.Popen] = {}
        self._tmp = tempfile.TemporaryDirectory(prefix="klineage-sandbox-")
        self._count = 0

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for server in self._servers.values():
            try:
                server.stdin.close()
                server.wait(timeout=5)
            except Exception:
                server.kill()
        self._servers.clear()
        self._tmp.cleanup()

    def _paths(self) -> tuple[str, str]:
        self._count += 1
        base = Path(self._tmp.name) / f"job{self._count}"
        return f"{base}.result", f"{base}.log"

    def run(self, job: Job) -> SandboxResult:
        result_path, log_path = self._paths()
        if not self.warm:
            return self._run_cold(job, result_path, log_path)
        mode = job.env.get("TRITON_INTERPRET", "")
        try:
            server = self._ensure_server(mode)
            _send(server.stdin, (job, result_path, log_path))
            reply = self._read_reply(server, job.timeout_s + 60)
        except (BrokenPipeError, OSError, EOFError) as e:
            reply = None
            why = str(e)
        else:
            why = "warm server stopped answering"
        if reply is None:  # the server died or hung: replace it and report this job as failed
            self._kill_server(mode)
            return SandboxResult(False, error=why, kind="crash", log=_log_tail(log_path))
        return reply

    def _read_reply(self, server: subprocess.Popen, timeout_s: float):
        import selectors

        with selectors.DefaultSelector() as sel:
            sel.register(server.stdout, selectors.EVENT_READ)
            if not sel.select(timeout_s):
                return None
        return _recv(server.stdout)

    def _ensure_server(self, mode: str) -> subprocess.Popen:
        server = self._servers.get(mode)
        if server is not None and server.poll() is None:
            return server
        env = (
            {**os.environ, "TRITON_INTERPRET": mode}
            if mode
            else {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        )
        log = Path(self._tmp.name) / f"server{mode}.log"
        server = subprocess.Popen(
            [sys.executable, "-m", "klineage.sandbox", "--serve", ",".join(self.preload)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(log, "ab"),
            start_new_session=True,
            env=env,
        )
        self._servers[mode] = server
        if self._read_reply(server, 300) != "ready":
            self._kill_server(mode)
            raise OSError(f"warm sandbox server failed to start: {_log_tail(str(log))[-500:]}")
        return server

    def _kill_server(self, mode: str) -> None:
        server = self._servers.pop(mode, None)
        if server is not None:
            try:
                os.killpg(server.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            server.wait()

    def _run_cold(self, job: Job, result_path: str, log_path: str) -> SandboxResult:
        started = time.perf_counter()
        request = Path(result_path).with_suffix(".job")
        request.write_bytes(pickle.dumps(job))
        proc = subprocess.Popen(
            [sys.executable, "-m", "klineage.sandbox", "--once", str(request), result_path, log_path],
            env={**os.environ, **job.env},
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            proc.wait(timeout=job.timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            timed_out = True
        status = None if timed_out else _returncode_to_status(proc.returncode)
        try:
            data = Path(result_path).read_bytes()
        except OSError:
            data = b""
        return _collect(parse_result(data), log_path, status, started, timed_out)


def _returncode_to_status(rc: int) -> int:
    """Turn a Popen return code into a waitpid status for `describe_exit`."""
    return (-rc) & 0x7F if rc < 0 else (rc & 0xFF) << 8


if __name__ == "__main__":
    # run through the importable module so pickled results name klineage.sandbox classes, not __main__ ones
    from klineage import sandbox as _module

    if sys.argv[1] == "--serve":
        _module._serve()
    elif sys.argv[1] == "--once":
        fd = os.open(sys.argv[3], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        _module._run_in_child(pickle.loads(Path(sys.argv[2]).read_bytes()), fd, sys.argv[4])
