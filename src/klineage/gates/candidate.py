"""The candidate process: the program runs here, apart from the judge that decides its verdict.

The judge (a sandbox job's child) forks it first thing, before CUDA is up in the judge and before any input or
reference exists in its memory. The candidate confines itself (isolation.confine: its own uid, namespaces, limits,
every descriptor but its two pipes closed), imports the program, then serves the judge's requests over the pipes
in wire frames: `init` (build ModelNew for a case from its init inputs), `call` (run forward on the inputs sent,
under the run-time guards, some runs in the state a user's call has, and hand back the outputs and the inputs as
they are afterwards), `task` (one of the
fixed TASKS of the other gates: compile, time, loop forward; the judge checks its answer's shape, gates.answers),
`exit`. While it works on a request the candidate may ask its judge for a GPU turn (sandbox.broker_turns): the judge
holds the job's lock, and trades it for the candidate's timed section.

What the candidate reports beside values (its findings from the guards, its launch trace, the functions that ran,
its autotune picks) is evidence the judge may fail a check on and never passes one on: the judge passes on the
values it compares itself (gates.correctness). The judge's side is `start` and the `Candidate` handle."""

from __future__ import annotations

import contextlib
import importlib
import os
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from klineage.compare import Finding, flatten_outputs
from klineage.config import clip
from klineage.gates.common import Verdict
from klineage.guards import check_guards, launch_findings, tensor_storages
from klineage.program import Program
from klineage.sandbox import MEMORY_LIMIT_CPU, GpuTurns, broker_turns, describe_exit, take_turns
from klineage.wire import Bulk, Frame, WireError, pack_values, read_frame, unpack_inputs, write_frame


@dataclass(frozen=True)
class Spec:
    """What the judge gives the candidate at the fork (in memory: nothing of it is secret)."""

    program: Program
    device: str  # "cpu" (kernels through the Triton interpreter) or "cuda"
    guard_bytes: int
    layout: str | None = None  # a probe's input layout (gates.common.to_device)
    compile: bool = False  # a probe that runs forward under torch.compile
    hidden: tuple[str, ...] = ()  # what the candidate must not read (the data directory, home)
    needs: tuple[str, ...] = ()  # what it must read beyond the interpreter and torch/Triton (this package)
    kernel_cache: str | None = None  # the program's own writable Triton cache (`kernel_cache`); None: a private one
    interpret: bool | None = None  # kernels through the Triton interpreter; None: on the CPU (the correctness gate)
    autotune_picks: bool = True  # every autotuner runs one chosen config (a check); off: as Triton does (timing)
    device_memory: float | None = None  # on a GPU, the fraction of its memory the candidate may allocate
    others: tuple[Program, ...] = ()  # more programs a task installs (a timed pair's child, the references)
    # a self-reference workload's original program, run as the reference (gates.confined): it answers `reference`
    # requests (a plain forward, no guards: it is not judged) and nothing a candidate is asked
    reference: bool = False
    turns: str = "work"  # how the judge holds its shared GPU turn (config.TURN_HOLDS): whether host work asks


class CandidateGone(RuntimeError):
    """The candidate ended, or answered with something that is not a frame: the check fails with `code`."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


@dataclass
class Candidate:
    """The judge's handle on a running candidate: requests out by one pipe, frames back by another, their bodies
    through one shared region each way (wire.Bulk)."""

    pid: int
    to_fd: int
    from_fd: int
    private_dir: Path
    to_bulk: Bulk | None = None
    from_bulk: Bulk | None = None
    hello: dict = field(default_factory=dict)
    program_path: str = ""  # the file of the program it serves (an import error names it)
    gone: CandidateGone | None = None  # how it ended before its hello, where greet_together was waiting for another

    def request(self, meta: dict, tensors: dict | None = None, body_limit: int = 2**34) -> Frame:
        """Send a request, serve the candidate's turn requests meanwhile, return its answer (CandidateGone where
        it ended, answered something that is not a frame, or reported an error)."""
        held: list = []  # the turns the candidate holds now, innermost last
        try:
            self._send(meta, tensors)
            while (frame := self._step(body_limit, held)) is None:
                pass
        finally:
            _give_back(held)
        return _answered(frame)

    def _send(self, meta: dict, tensors: dict | None = None) -> None:
        try:
            write_frame(self.to_fd, tensors or {}, meta, self.to_bulk)
        except BrokenPipeError as e:
            raise CandidateGone(*self._ended(str(e))) from None
        except (WireError, OSError) as e:
            raise CandidateGone("protocol_error", f"the request could not be sent: {e}") from None

    def _step(self, body_limit: int, held: list) -> Frame | None:
        """One frame from the candidate: a turn or room it asks for is served (None), anything else is its answer."""
        try:
            frame = read_frame(self.from_fd, body_limit=body_limit, bulk=self.from_bulk)
            if "grow" in frame.meta:
                self._grow(frame.meta["grow"], body_limit)
                return None
            if "turn" in frame.meta:
                self._turn(frame.meta, held)
                return None
        except (BrokenPipeError, EOFError) as e:
            raise CandidateGone(*self._ended(str(e))) from None
        except (WireError, OSError) as e:
            raise CandidateGone("protocol_error", f"the candidate's answer is not a frame: {e}") from None
        return frame

    def _grow(self, size, body_limit: int) -> None:
        """The candidate asks for room in the answer's region: granted up to what this request accepts back."""
        if type(size) is not int or not 0 < size <= max(body_limit, 0) + BULK_SLACK or self.from_bulk is None:
            raise CandidateGone("protocol_error", f"asked for {str(size)[:40]} bytes of answer, over {body_limit}")
        if self.from_bulk.size() < size:
            self.from_bulk.grow(size)
        write_frame(self.to_fd, {}, {"granted": "grow"})

    def _turn(self, meta: dict, held: list) -> None:
        """One turn request: the judge enters or leaves its own exclusive_turn / off_gpu / host_work, or yields, for
        the candidate (which cannot: confinement closed its copy of the lock file), then says so."""
        from klineage.sandbox import exclusive_turn, host_work, off_gpu, yield_turn

        kind, entering = meta.get("turn"), meta.get("enter")
        if kind not in ("exclusive", "off", "host", "yield") or type(entering) is not bool:
            raise CandidateGone("protocol_error", f"a turn request that is not one: {str(meta)[:200]}")
        if kind == "yield":
            yield_turn()
        elif entering:
            if len(held) >= TURN_DEPTH:
                raise CandidateGone("protocol_error", f"more than {TURN_DEPTH} turns held at once")
            turn = {"exclusive": exclusive_turn, "off": off_gpu, "host": host_work}[kind]()
            turn.__enter__()
            held.append((kind, turn))
        else:
            if not held or held[-1][0] != kind:
                raise CandidateGone("protocol_error", f"left a {kind} turn it did not hold")
            held.pop()[1].__exit__(None, None, None)
        write_frame(self.to_fd, {}, {"granted": kind})

    def _ended(self, why: str) -> tuple[str, str]:
        from klineage.isolation import end_all

        end_all(self.pid)
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            return "crash", f"the candidate process ended ({why})"
        kind, text = describe_exit(status)
        return kind, f"the candidate process {text}"

    def greet(self) -> dict:
        """Wait for the candidate's hello: it confined itself and imported its program (or says why it did not).
        Where `greet_together` had it already, that hello, or the CandidateGone it ended with."""
        if self.gone is not None:
            raise self.gone
        if not self.hello:  # a hello always carries the isolation report: empty is not greeted yet
            self.hello = self.request({"op": "hello"}, body_limit=0).meta
        return self.hello

    def close(self) -> None:
        from klineage.isolation import end_all, remove_private_dir

        for fd in (self.to_fd, self.from_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        for bulk in (self.to_bulk, self.from_bulk):
            if bulk is not None:
                bulk.close()
        end_all(self.pid)
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        remove_private_dir(self.private_dir)


def _give_back(held: list) -> None:
    """The turns a candidate still holds when its answer came (or it died inside them), innermost first."""
    while held:
        held.pop()[1].__exit__(None, None, None)


def _answered(frame: Frame) -> Frame:
    """The candidate's answer, or the error it reported as CandidateGone."""
    error = frame.meta.get("error")
    if isinstance(error, dict):
        raise CandidateGone(str(error.get("code", "forward_error"))[:64], str(error.get("detail", ""))[:2000])
    return frame


def greet_together(candidate: Candidate, others: list[Candidate]) -> None:
    """Hello to each process, then each answer taken as it comes, a turn any of them asks for meanwhile served as
    `request` serves it: the candidate and the processes beside it (its reference) confine themselves and import
    their programs side by side. The candidate's failure raises CandidateGone; another's is kept on it
    (`Candidate.gone`: its `greet` raises it, and the gate decides what it means)."""
    import select

    everyone = [candidate, *others]
    held: dict[int, list] = {id(p): [] for p in everyone}
    waiting: dict[int, Candidate] = {}
    try:
        for process in everyone:
            try:
                process._send({"op": "hello"})
                waiting[process.from_fd] = process
            except CandidateGone as e:
                if process is candidate:
                    raise
                process.gone = e
        while waiting:
            ready, _, _ = select.select(list(waiting), [], [])
            for fd in ready:
                process = waiting[fd]
                try:
                    frame = process._step(0, held[id(process)])
                    if frame is None:
                        continue
                    process.hello = _answered(frame).meta
                except CandidateGone as e:
                    if process is candidate:
                        raise
                    process.gone = e
                del waiting[fd]
    finally:
        for turns in held.values():
            _give_back(turns)


# what a grow request may exceed the request's body limit by: the alignment of each tensor in the region and the
# 2 MiB rounding of its growth (wire.Bulk.ensure)
BULK_SLACK = 4 * 2**20

# the most turns a candidate may hold nested (an autotuner's exclusive turn inside time_calls' is one deep)
TURN_DEPTH = 4

# what a `task` request may run in the candidate: fixed names, each a function (served, frame) -> (tensors, meta)
TASKS = {
    "compile_target": "klineage.gates.compile:target_task",
    "compile_gpu": "klineage.gates.compile:gpu_task",
    "profile": "klineage.gates.profile:profile_task",
    "forward_loop": "klineage.gates.profile:forward_loop_task",
    "pair": "klineage.gates.profile:pair_task",
    "references": "klineage.bench.references:references_task",
}


@contextmanager
def running(spec: Spec) -> Iterator[Candidate]:
    """A started candidate for the block, ended and its directory removed after; CandidateGone if it never said
    hello, ImportError if the program did not import."""
    candidate = start(spec)
    try:
        if candidate.hello.get("import_error"):
            raise ImportError(f"program failed to import: {candidate.hello['import_error']}")
        yield candidate
    finally:
        candidate.close()


def judged(
    gate: str,
    spec: Spec,
    body: Callable[..., Verdict],
    alongside: Callable[[], object] | None = None,
) -> Verdict:
    """A gate whose program runs in a candidate: `body(candidate)` builds the verdict from the answers; a candidate
    that ended is `crash`/`oom`/..., an answer without the shape asked `protocol_error`, a program that did not
    import `import_error`. The isolation line goes into the evidence, as the correctness gate's does.

    `alongside`: a second process the gate needs (the reference process, gates.confined.fork_reference), forked
    right after the candidate and before its hello, so the two confine themselves and import their programs side
    by side; it is given to `body(candidate, companion)` and ended with the candidate. On the H100 the two started
    one after the other took 5.3 and 4.7 s of a FlagGems candidate's 28 s check (RESULTS.md#wild-14)."""
    from dataclasses import replace

    from klineage.gates.answers import AnswerError

    try:
        candidate = start(spec, greet=False)
    except CandidateGone as e:
        return Verdict(gate, "fail", e.code, e.detail)
    companion = None
    try:
        companion = alongside() if alongside is not None else None
        if isinstance(companion, Candidate):
            greet_together(candidate, [companion])
        else:
            candidate.greet()
        if candidate.hello.get("import_error"):
            verdict = Verdict(
                gate, "fail", "import_error", f"program failed to import: {candidate.hello['import_error']}"
            )
        else:
            verdict = body(candidate) if alongside is None else body(candidate, companion)
    except CandidateGone as e:
        verdict = Verdict(gate, "fail", e.code, e.detail)
    except AnswerError as e:
        verdict = Verdict(gate, "fail", "protocol_error", f"the candidate's answer does not hold what was asked: {e}")
    finally:
        candidate.close()
        if isinstance(companion, Candidate):
            companion.close()
    isolation = candidate.hello.get("isolation_line")
    return replace(verdict, evidence={**verdict.evidence, "isolation": isolation}) if isolation else verdict


def task(candidate: Candidate, name: str, body_limit: int = 0, **meta) -> Frame:
    """One task request; `body_limit`: the bytes of tensors the judge accepts back (none unless said)."""
    return candidate.request({"op": "task", "task": name, **meta}, body_limit=body_limit)


def spec_for(request, **changes) -> Spec:
    """The Spec of a gate job's candidate: the request's program and device, the data directory and home hidden,
    this package and the workload file readable (a task imports the workload to make its own inputs)."""
    from dataclasses import replace

    workload = Path(request.workload_path).resolve()
    cache = request.settings.inputs_dir
    readable = [str(p) for p in (workload, cache, *declared_reads(workload)) if p is not None and Path(p).exists()]
    spec = Spec(
        request.program,
        request.device,
        request.settings.guard_bytes,
        hidden=hidden_paths(request.settings),
        needs=(package_root(), *installed_roots(request.program), *readable),
        device_memory=request.settings.candidate_device_memory,
        turns=request.settings.gpu_turns,
    )
    spec = replace(spec, **changes)
    if spec.others:  # two programs' kernels in one cache: the other could plant a cubin under this one's key
        return spec
    return replace(spec, kernel_cache=_kernel_cache_or_none(request))


def _kernel_cache_or_none(request) -> str | None:
    """The program's own persistent Triton cache (`kernel_cache`), or None (a private one) where the data directory
    cannot hold it."""
    try:
        return kernel_cache(request.settings, request.program)
    except OSError:
        return None


def declared_reads(workload: Path) -> list[str]:
    """The files a workload says it reads beside itself (a module-level `READS` list of path strings, as the
    self-reference workload writes: the original program and the inputs file), read from its text: the judge does
    not import the workload before it forks the candidate."""
    import ast

    try:
        tree = ast.parse(workload.read_text())
    except (OSError, SyntaxError, ValueError):
        return []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "READS" for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return []
            return [str(Path(v).resolve()) for v in value if isinstance(v, str)] if isinstance(value, list) else []
    return []


def hidden_paths(settings) -> tuple[str, ...]:
    """What the candidate may not read: the data directory (the verdict cache, the library) and the home."""
    return tuple(str(p) for p in (settings.data_dir, Path.home()) if p.exists())


def package_root() -> str:
    """What the candidate must read beyond the interpreter and torch/Triton: this package, for its guards."""
    import klineage

    return str(Path(klineage.__file__).resolve().parent.parent)


def installed_roots(program: Program) -> list[str]:
    """The site directories a program's carried copies of installed modules import their package from, by the one
    rule of what a confined process may read (isolation.site_dirs)."""
    from klineage.isolation import site_dirs

    return sorted({str(Path(p).resolve()) for p in site_dirs({dotted.split(".")[0] for dotted in program.modules})})


def start(spec: Spec, greet: bool = True) -> Candidate:
    """Fork the candidate and wait for its hello (the program imported, or why not: CandidateGone); with `greet`
    False the caller does that later (`Candidate.greet`), having forked what else it needs meanwhile."""
    from klineage.isolation import make_private_dir
    from klineage.sandbox import PRELOAD

    # what the warm server imports once: in a cold child, imported here, before the fork, or the candidate and the
    # judge would each import torch and Triton (a cold CPU check took 1.6x as long that way, benchmarks/gate_cost.py
    # on this 2-core machine). The harness's modules only: nothing of the workload, no CUDA.
    for name in PRELOAD:
        importlib.import_module(name)
    private = make_private_dir()
    judge = os.getpid()  # read before the fork: a candidate whose judge died before it was confined ends itself
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    down_bulk, up_bulk = Bulk.create("klineage-judge-to-candidate"), Bulk.create("klineage-candidate-to-judge")
    pid = os.fork()
    if pid == 0:  # the candidate: never returns
        os.close(down_w)
        os.close(up_r)
        code = 1
        try:
            _serve(spec, down_r, up_w, private, judge, (down_bulk.fd, up_bulk.fd))
            code = 0
        finally:
            os._exit(code)
    os.close(down_r)
    os.close(up_w)
    named = str(spec.program.path or spec.program.name)
    handle = Candidate(pid, down_w, up_r, private, down_bulk, up_bulk, program_path=named)
    if greet:
        handle.greet()
    return handle


# The program's kernel cache: Triton compiles a kernel into `<cache>/<key>/`, where the key hashes the kernel's source,
# its specialization and the target, and reads it back from there without compiling again. A candidate's private cache
# goes with its private directory, so each gate's candidate would compile every kernel again (1-3 s a specialization
# on the H200, 18 specializations for the autotuned matmul). `kernel_cache` gives the candidates of ONE program one
# writable cache that outlives them, keyed by the digest of the program's source files (program_digest). Never one
# for two programs: whatever a candidate writes there is trusted by the next candidate that reads it, so a shared
# writable cache would let one program plant a cubin under another program's key (an expert's, the next candidate
# of a walk) and have that program run the planted code in its own check, failing it or passing it; with one cache a
# program, what a candidate plants runs only as the same program, whose own code could do the same directly. The
# judge's shared cache stays read-only to every candidate (isolation.Confinement.shared_cache). docs/security.md.
KERNEL_CACHES_KEPT = 64  # program caches kept, the most recently used; more are removed before the next fork
KERNEL_CACHE_BYTES = 8 * 2**30  # and their total size


def kernel_cache(settings, program: Program) -> str:
    """The writable Triton cache the candidates of `program` share: `<data_dir>/kernels/<program_digest>`, made if new
    (owned by the candidate's uid when running as root), marked used now; then the other programs' caches beyond
    KERNEL_CACHES_KEPT, or beyond KERNEL_CACHE_BYTES together, are removed, least recently used first (this one too
    if it alone is over the size: made again empty). Run in the judge, before the fork."""
    import time

    from klineage.isolation import NOBODY, remove_private_dir

    root = Path(settings.data_dir) / "kernels"
    path = root / program_digest(program)
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o700)  # the data directory's own rule: the judge's only (candidates reach theirs by a bind)
    if os.geteuid() == 0 and path.is_dir() and not _owned_by(path, NOBODY):
        # a data directory copied by root (`cp -r`) hands the candidate a cache it cannot write: the bundled
        # matmul expert's resumed walk failed its own compile gate with a PermissionError (2026-12-06). A cache:
        # made again empty, never chowned (a candidate's symlinks are not followed by anything here)
        remove_private_dir(path)
    path.mkdir(exist_ok=True)
    if os.geteuid() == 0:
        os.chown(path, NOBODY, NOBODY)
    now = time.time()
    os.utime(path, (now, now))
    prune_kernel_caches(root, keep=path, count=KERNEL_CACHES_KEPT, size=KERNEL_CACHE_BYTES)
    if not path.is_dir():
        path.mkdir()
        if os.geteuid() == 0:
            os.chown(path, NOBODY, NOBODY)
    return str(path)


def _owned_by(path: Path, uid: int) -> bool:
    """Whether `path` and everything under it (links not followed) belong to `uid`."""
    if path.lstat().st_uid != uid:
        return False
    for top, dirs, files in os.walk(path):
        if any(os.lstat(os.path.join(top, name)).st_uid != uid for name in (*dirs, *files)):
            return False
    return True


def program_digest(program: Program) -> str:
    """SHA-256 of the program's files as they are (not Program.hash: 64 bits of a normalized text, which another
    program could be made to match), the name of its kernel cache."""
    import hashlib

    digest = hashlib.sha256()
    for name, text in [("", program.source), *sorted(program.modules.items())]:
        for part in (name, text):
            digest.update(len(part.encode()).to_bytes(8, "little") + part.encode())
    return digest.hexdigest()


def prune_kernel_caches(
    root: Path, keep: Path | None = None, count: int = KERNEL_CACHES_KEPT, size: int = KERNEL_CACHE_BYTES
) -> list[str]:
    """Remove program caches under `root`, least recently used (directory mtime) first, until at most `count` are
    left and they hold at most `size` bytes together; `keep` goes last. Returns the names removed."""
    from klineage.isolation import remove_private_dir

    caches = sorted(
        (p for p in root.iterdir() if p.is_dir() and not p.is_symlink()),
        key=lambda p: (p == keep, p.stat().st_mtime),
    )
    sizes = {p: _bytes_under(p) for p in caches}
    total, removed = sum(sizes.values()), []
    for p in caches:
        if len(caches) - len(removed) <= count and total <= size:
            break
        remove_private_dir(p)  # a candidate's files, whatever modes it left them in
        total -= sizes[p]
        removed.append(p.name)
    return removed


def _bytes_under(path: Path) -> int:
    """Bytes of the files under `path`, links not followed (a candidate wrote them)."""
    total = 0
    for top, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(top, name)).st_blocks * 512
            except OSError:
                pass
    return total


# --- the candidate's side -----------------------------------------------------------------------------------------


def _serve(spec: Spec, down: int, up: int, private: Path, judge: int, bulk_fds: tuple[int, int]) -> None:
    """Confine, import, then answer until `exit` or the judge's end of the pipe closes."""
    from klineage.isolation import Confinement, confine

    report = confine(
        Confinement(
            str(private),
            memory_bytes=_MEMORY[spec.device == "cuda"],
            device=spec.device,
            hidden=spec.hidden,
            needs=spec.needs,
            keep_fds=(1, 2, down, up, *bulk_fds),
            judge_pid=judge,
            shared_cache=None if spec.device == "cuda" else "",  # the judge's Triton cache, read-only; none on the CPU
            kernel_cache=spec.kernel_cache,
        )
    )
    if spec.device == "cuda" and spec.device_memory:
        _cap_device_memory(spec.device_memory)
    broker_turns(lambda kind, entering: _ask_turn(down, up, kind, entering))
    take_turns(GpuTurns("", spec.turns))  # no lock of its own: what host_work asks of the judge follows its turns
    if spec.device == "cuda":
        _compiles_as_host_work()
    down_bulk = Bulk(bulk_fds[0])
    up_bulk = Bulk(bulk_fds[1], grow=lambda size: _ask_room(down, up, size))
    served = _Served(spec, report)
    while True:
        try:
            frame = read_frame(down, bulk=down_bulk)
        except (EOFError, WireError):
            return
        op = frame.meta.get("op")
        if op == "exit":
            return
        try:
            tensors, meta = served.answer(op, frame)
        except BaseException as e:  # the judge hears every failure as a value
            from klineage.gates.common import memory_finding

            traceback.print_exc()
            code = "oom" if memory_finding(e) is not None else "forward_error"  # a task's model or inputs too big
            tensors, meta = {}, {"error": {"code": code, "detail": f"{type(e).__name__}: {e}"}}
        try:
            write_frame(up, tensors, meta, up_bulk)
        except WireError as e:  # no room granted: the judge has its verdict already
            traceback.print_exc()
            write_frame(up, {}, {"error": {"code": "protocol_error", "detail": str(e)}})
        del frame


def _cap_device_memory(fraction: float) -> None:
    """Before the program is imported: the caching allocator refuses what would take this process past `fraction`
    of the device, as torch.OutOfMemoryError (an `oom` verdict), where a program asking for more than the GPU
    holds (or for most of a GPU that other jobs share) would otherwise get it. The program could lift the cap again
    (torch.cuda.set_per_process_memory_fraction is refused by the static policy for untrusted code); the driver's
    own limit is the device's memory."""
    import torch

    torch.cuda.set_per_process_memory_fraction(fraction, torch.cuda.current_device())


def _compiles_as_host_work() -> None:
    """Triton compiling a kernel (at its first launch with a new specialization, 1-3 s each on the H200) runs as
    sandbox.host_work: the judge lets a waiting timer have the GPU meanwhile. `_do_compile` is what a launch calls
    on a cache miss, in Triton 3.6 (the pinned version); where it is missing, compiles keep the turn."""
    from triton.runtime.jit import JITFunction

    from klineage.sandbox import host_work

    compile_ = getattr(JITFunction, "_do_compile", None)
    if compile_ is None or getattr(compile_, "host_work", False):
        return

    def _do_compile(self, *args, **kwargs):
        with host_work():
            return compile_(self, *args, **kwargs)

    _do_compile.host_work = True
    JITFunction._do_compile = _do_compile


def _ask_room(down: int, up: int, size: int) -> None:
    """wire.Bulk's `grow` in the candidate: its file-size limit stops it growing the region past 1 GiB itself."""
    write_frame(up, {}, {"grow": size})
    read_frame(down, body_limit=0)


def _ask_turn(down: int, up: int, kind: str, entering: bool) -> None:
    """sandbox.broker_turns' `ask` in the candidate: the judge enters or leaves the turn, then answers."""
    write_frame(up, {}, {"turn": kind, "enter": entering})
    read_frame(down, body_limit=0)


# host memory the candidate may add to what it maps at its start: on the CPU what a sandbox job had before
# (sandbox.MEMORY_LIMIT_CPU); on a GPU room for a bench case's inputs and outputs, which arrive and leave through
# host memory as wire frames (cross-entropy's 8192 x 32000 logits alone are 1 GiB), and for a probe's
MEMORY_LIMIT_GPU_HOST = 64 * 2**30
_MEMORY = {False: MEMORY_LIMIT_CPU, True: MEMORY_LIMIT_GPU_HOST}


class _Served:
    """The candidate's state across requests: the imported program, one model per case, guarded input buffers
    per case, the storages earlier calls returned, what ran."""

    def __init__(self, spec: Spec, report) -> None:
        self.spec = spec
        self.report = report
        self.module = None
        self.import_error = ""
        self.models: dict = {}
        self.buffers: dict = {}
        self.output_storages: set = set()
        self.kernels: set = set()
        self.functions: set = set()
        self.picks = None
        self.host_ops: frozenset = frozenset()  # the workload's HOST_OPS, sent with a case's init
        self.interpret = False
        self.loaded: tuple | None = None  # a task's (workload, its module), imported once
        self.timed: dict = {}  # what a timing task keeps for the judge's later requests (forward_loop, a round)
        self.imported = False

    def _import(self) -> None:
        from klineage.gates.autotune import AutotunePicks
        from klineage.gates.common import prepare_program

        interpret = self.spec.device == "cpu" if self.spec.interpret is None else self.spec.interpret
        self.interpret = interpret
        if self.spec.device == "cpu":  # no GPU: CUDA in the program's host code maps to the CPU, compiled or not
            from klineage.cuda_on_cpu import install

            install()
        try:
            self.module, self.program_dir = prepare_program(self.spec.program, interpret)
        except Exception as e:
            traceback.print_exc()
            self.import_error = f"{type(e).__name__}: {e}"
            return
        if self.spec.autotune_picks:
            self.picks = AutotunePicks().__enter__()  # for the process's life: it ends with the candidate

    def answer(self, op: str, frame: Frame) -> tuple[dict, dict]:
        if not self.imported:  # at the first request, the judge's hello: a turn asked for meanwhile reaches it
            from klineage.sandbox import host_work

            self.imported = True
            with host_work() if self.spec.device == "cuda" else contextlib.nullcontext():
                self._import()
        if op == "hello":
            meta = {"isolation": self.report.to_json(), "isolation_line": self.report.describe()}
            if self.import_error:
                meta["import_error"] = self.import_error
            return {}, meta
        if self.module is None:
            return {}, {"error": {"code": "import_error", "detail": self.import_error}}
        if op == "init":
            return self._init(frame)
        if op == "reference" and self.spec.reference:
            return self._reference(frame)
        if op == "call" and not self.spec.reference:
            return self._call(frame)
        if op == "task" and frame.meta.get("task") in TASKS:
            module_name, function = TASKS[frame.meta["task"]].split(":")
            return getattr(importlib.import_module(module_name), function)(self, frame)
        return {}, {"error": {"code": "protocol_error", "detail": f"unknown request {op!r}"}}

    def workload(self, path: str) -> tuple:
        """A task's workload, imported here to make the task's own inputs (nothing made here is compared)."""
        if self.loaded is None:
            from klineage.workload import import_file, workload_from_module

            file = Path(path)
            self.loaded = (
                workload_from_module(file, file.read_text(), module := import_file(file, "klineage_workload")),
                module,
            )
        return self.loaded

    def _init(self, frame: Frame) -> tuple[dict, dict]:
        from klineage.gates.common import build

        init = unpack_inputs(frame, frame.meta["init"])
        model = build(self.module.ModelNew, init).to(self.spec.device)
        if self.spec.compile:
            import torch

            torch._dynamo.reset()
            model = torch.compile(model)
        self.models[frame.meta["case"]] = model
        self.host_ops = frozenset(str(op) for op in frame.meta.get("host_ops") or ())
        return {}, {"ok": True}

    def _call(self, frame: Frame) -> tuple[dict, dict]:
        """Run forward `runs` times on the inputs sent (in guarded buffers, refilled in place per case), restoring
        the inputs the judge names before each run after the first; answer each run's outputs with this process's
        findings, then the inputs as they are after the last run."""
        import torch

        meta = frame.meta
        case, runs = meta["case"], int(meta["runs"])
        users = [int(u) for u in meta.get("user_like") or ()] + [0] * runs  # per run: 0, or a seed (_guarded_call)
        self.picks.choose(int(meta.get("config", 0)))
        inputs, input_log = self._inputs_for(case, unpack_inputs(frame, meta["inputs"], self.spec.device))
        before = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        main_stream = torch.cuda.current_stream().cuda_stream if self.spec.device == "cuda" else None
        tensors, described, launches = {}, [], None
        for run in range(runs):
            for i in meta.get("restore", []):  # each run starts from the same inputs
                if run and isinstance(inputs[i], torch.Tensor):
                    inputs[i].copy_(before[i])
            done, failure = self._guarded_call(self.models[case], inputs, users[run])
            if failure is not None:
                return {}, {"failure": finding_json(failure), **self._evidence()}
            record, outputs = done
            self.kernels.update(launch.kernel for launch in record.launches)
            launches = launch_rows(record.launches) if launches is None else launches
            findings = {
                "subclass": finding_json(_subclass_finding(outputs)),
                "guards": finding_json(check_guards(record.allocations + input_log)),
                "replay": None if self.spec.compile else finding_json(self._replay_finding(record, outputs)),
                "launch": None if self.spec.compile else finding_json(launch_findings(record, outputs, main_stream)),
            }
            self.output_storages |= _storages(outputs)
            made, outs = pack_values([_plain(o) for o in outputs], f"r{run}o")
            devices = [str(o.device.type) if isinstance(o, torch.Tensor) else "" for o in outputs]
            tensors.update(made)
            described.append({"outputs": outs, "devices": devices, "findings": findings})
        made, back = pack_values(inputs, "in")
        tensors.update(made)
        return tensors, {"runs": described, "inputs": back, "launches": launches, **self._evidence()}

    def _reference(self, frame: Frame) -> tuple[dict, dict]:
        """The reference process's forward: the original program on the inputs sent, as a user calls it (no_grad,
        the first autotune config: a reference need not be the fastest), its outputs and the inputs as they are
        afterwards (in-place results) handed back as values."""
        import torch

        from klineage.gates.common import sync

        meta = frame.meta
        if self.picks is not None:
            self.picks.choose(0)
        inputs = unpack_inputs(frame, meta["inputs"], self.spec.device)
        with torch.no_grad():
            outputs = flatten_outputs(self.models[meta["case"]](*inputs))
            sync(self.spec.device)
        tensors, outs = pack_values([_plain(o) for o in outputs], "o")
        made, back = pack_values(inputs, "in")
        return {**tensors, **made}, {"outputs": outs, "inputs": back}

    def _evidence(self) -> dict:
        from klineage.cuda_on_cpu import used

        picks = self.picks
        return {
            "cuda_mapped": used(),
            "kernels": sorted(self.kernels),
            "functions": sorted(self.functions),
            "autotune": {"offered": picks.offered, "chosen": dict(picks.chosen), "unrunnable": picks.unrunnable},
        }

    def _inputs_for(self, case: str, values: list) -> tuple[list, list]:
        """Device inputs in guarded buffers. A case's buffers are reused when the layout matches, refilled in
        place with the new seed's values: a program that caches by pointer then returns a stale answer."""
        import torch

        from klineage.gates.common import to_device

        def layout(xs):
            return [(tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else repr(x) for x in xs]

        held = self.buffers.get(case)
        if held is not None and layout(held[0]) == layout(values):
            inputs, log = held
            for buffer, value in zip(inputs, values):
                if isinstance(buffer, torch.Tensor):
                    buffer.copy_(value)
            inputs = [b if isinstance(b, torch.Tensor) else v for b, v in zip(inputs, values)]
        else:
            log = []
            device, guard = self.spec.device, self.spec.guard_bytes
            inputs = [to_device(x, device, guard, log, self.spec.layout) for x in values]
        self.buffers[case] = (inputs, log)
        return inputs, log

    def _guarded_call(self, model, inputs, user_like: int = 0):
        """One forward under every run-time guard; ((record, outputs), None) or (None, finding). A `user_like` call
        (a seed the judge drew) is in the state a user's call has: grad mode on, and fresh allocations holding
        random values rather than poison; the guards are the same."""
        import torch

        from klineage.gates.common import sync
        from klineage.guards import BackgroundThreadError, SideStreamError, TorchComputeError, guarded_forward

        try:
            guard = guarded_forward(self.spec.guard_bytes, self.host_ops, noise=user_like)
            grad = torch.enable_grad() if user_like else torch.no_grad()
            with grad, guard as record, _calls_into(self.functions, self.program_dir):
                if self.spec.compile:
                    outputs = flatten_outputs(_compiled_call(model, inputs))
                else:
                    outputs = flatten_outputs(model(*inputs))
                sync(self.spec.device)
        except TorchComputeError as e:
            return None, Finding("torch_compute", str(e))
        except BackgroundThreadError as e:
            return None, Finding("background_thread", str(e))
        except SideStreamError as e:
            return None, Finding("side_stream", str(e))
        except Exception as e:  # MemoryError is an Exception; torch.OutOfMemoryError a RuntimeError
            from klineage.gates.common import memory_finding
            from klineage.isolation import looks_out_of_memory

            found = memory_finding(e)  # host or device, with the size asked
            if found is None and looks_out_of_memory(type(e).__name__, str(e)):  # the limit isolation set
                found = Finding("oom", f"out of memory: {type(e).__name__}: {str(e)[:300]}")
            if found is not None:
                return None, found
            return None, Finding("forward_error", f"forward raised {type(e).__name__}: {clip(str(e), 1900)}")
        return (record, outputs), None

    def _replay_finding(self, record, outputs) -> Finding | None:
        """A call that launched nothing and handed back a tensor an earlier call returned is serving a cache."""
        if not record.launches and _storages(outputs) & self.output_storages:
            return Finding("stale_output", "returned an earlier call's output tensor without launching a kernel")
        return None


def finding_json(finding: Finding | None) -> dict | None:
    return None if finding is None else {"code": finding.code, "detail": finding.detail}


def _subclass_finding(outputs: list) -> Finding | None:
    import torch

    for i, out in enumerate(outputs):
        if isinstance(out, torch.Tensor) and type(out) is not torch.Tensor:
            return Finding("tensor_subclass", f"output {i} is a {type(out).__name__}, a Tensor subclass")
        if isinstance(out, torch.Tensor) and (out.layout != torch.strided or out.is_meta):
            return Finding("tensor_subclass", f"output {i} has no real storage")
    return None


def _plain(out):
    """What goes on the wire for an output: its values as a plain tensor taken right after the call (a later run may
    write into a tensor this run returned); a subclass was reported already."""
    import torch

    if isinstance(out, torch.Tensor) and (type(out) is not torch.Tensor or out.layout != torch.strided or out.is_meta):
        return None
    return out.detach().clone() if isinstance(out, torch.Tensor) else out


def _storages(outputs) -> set[int]:
    import torch

    # a sparse output's are its parts' (guards.tensor_storages): a cache of one is served through them
    return set().union(*(tensor_storages(o) for o in outputs if isinstance(o, torch.Tensor)))


def launch_rows(launches: list) -> list[dict]:
    """Each distinct launch of a forward: kernel, integer constexprs, warps, program count and (where any) the
    run-time arguments passed a Python float."""
    rows = []
    for launch in launches:
        row = {
            "kernel": launch.kernel,
            "constexprs": dict(launch.constexprs),
            "num_warps": launch.num_warps,
            "programs": launch.programs,
        }
        if launch.floats:
            row["floats"] = list(launch.floats)
        if row not in rows:
            rows.append(row)
    return rows


def _compiled_call(model, inputs):
    """A torch.compile probe's forward. Dynamo runs a frame eagerly under a dispatch mode, so the compute ban is
    off for it (the program's own check already enforced it), and Inductor's compile workers are not the
    program's threads; the launch tracer does not see Inductor's launches, so launch findings are skipped too."""
    from torch.utils._python_dispatch import _disable_current_modes

    from klineage.guards import TRACER

    TRACER.depth += 1
    try:
        with _disable_current_modes():
            return model(*inputs)
    finally:
        TRACER.depth -= 1


@contextmanager
def _calls_into(found: set, root: str):
    """Record the names of program functions that run (host functions and, under the interpreter, kernels), those
    whose code is under `root`, the program's directory: the walk only simplifies code the workload exercises; a
    site in code that never ran would pass vacuously.

    A profile hook sees every call, the interpreter's own included: over an interpreted grid it made the kernel x3.5
    slower (benchmarks/calls_into_hook.py, 256 programs: 3.6 -> 12.9 s, RESULTS.md#calls-into; FlagGems's avg_pool2d's
    candidate run took 21 s against its reference's 6 s). So only a grid's first program runs under the hook
    (anything it calls is noted as before); the others run without it (3.7 s), and the device functions they call
    are noted as the interpreter calls them."""
    import sys

    kernels: set = set()  # the code of the interpreted grids now running

    def note(code) -> None:
        if root and code.co_filename.startswith(root):
            found.add(code.co_name)

    def profile(frame, event, arg):
        if event == "call":
            note(frame.f_code)
        elif event == "return" and frame.f_code in kernels:
            sys.setprofile(None)  # the grid's first program has run; _grids_unhooked sets the hook again after it

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        with _grids_unhooked(kernels, note):
            yield
    finally:
        sys.setprofile(previous)


@contextmanager
def _grids_unhooked(kernels: set, note: Callable) -> Iterator[None]:
    """While it lasts, each interpreted grid puts its kernel's code in `kernels` (the profile hook lets go when its
    first program returns) and sets the hook back when it ends; each interpreted device function call is `note`d."""
    import sys

    interpreter = sys.modules.get("triton.runtime.interpreter")
    if interpreter is None:  # nothing interpreted: a hook over host code costs little
        yield
        return
    executor = interpreter.GridExecutor
    device = next(c for c in type.mro(interpreter.InterpretedFunction) if "__call__" in vars(c))
    grid_call, device_call = executor.__call__, device.__call__

    def grid(self, *args, **kwargs):
        kernels.add(self.fn.__code__)
        hook = sys.getprofile()
        try:
            return grid_call(self, *args, **kwargs)
        finally:
            kernels.discard(self.fn.__code__)
            sys.setprofile(hook)

    def device_function(self, *args, **kwargs):
        note(self.fn.__code__)
        return device_call(self, *args, **kwargs)

    executor.__call__, device.__call__ = grid, device_function
    try:
        yield
    finally:
        executor.__call__, device.__call__ = grid_call, device_call
