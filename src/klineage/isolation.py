"""The candidate's OS confinement: what Linux gives a process without a service to install.

The judge forks the candidate process; the candidate calls `confine` first thing, before it imports the program.
`confine` applies what it can and returns an `IsolationReport` naming each mechanism as applied or not available
(with the reason), so a machine that lacks one says so in the verdict's evidence instead of failing silently.

Judge side: `make_private_dir` before the fork (the candidate's HOME, TMPDIR and Triton cache, owned by the uid the
candidate drops to), `seal` on the data directory and home (0700, judge-owned), `end_all` when the evaluation is over
(the process group, and with it the PID namespace, killed), `remove_private_dir` after.

Why each mechanism and what was measured: docs/security.md and /work/shared/reference/judge-isolation.md.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import resource
import shutil
import signal
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

NOBODY = 65534


@dataclass(frozen=True)
class Confinement:
    """What the candidate is confined to. `None` turns a limit off (reported as such, not as unavailable)."""

    private_dir: str  # the only writable directory: HOME, TMPDIR and TRITON_CACHE_DIR point inside it
    memory_bytes: int | None = 4 << 30  # allocations beyond what the process already maps, at the moment of `confine`
    device: str = "cpu"  # "cpu": RLIMIT_AS; "cuda": RLIMIT_DATA (CUDA reserves address space far beyond memory)
    max_processes: int | None = 512  # RLIMIT_NPROC, per uid, threads included (torch and CUDA start threads)
    max_file_bytes: int | None = 1 << 30  # RLIMIT_FSIZE: no single file written larger
    cpu_seconds: int | None = None  # RLIMIT_CPU; the judge's own timeout is the first line
    uid: int = NOBODY  # dropped to when running as root
    gid: int = NOBODY
    hidden: tuple[str, ...] = ()  # paths the candidate must not read (data directory, home); checked after the drop
    needs: tuple[str, ...] = ()  # paths the candidate must read (the torch/Triton install, the program's files)
    keep_fds: tuple[int, ...] | None = None  # every other descriptor closed; None leaves them all open
    pid_namespace: bool = True  # a grandchild that calls setsid() still dies with the check (one extra fork)
    network_namespace: bool = True
    # the judge's pid, read before the fork: a judge that died before PR_SET_PDEATHSIG was set is noticed here
    judge_pid: int | None = None
    # a Triton cache the candidate reads (never writes), linked key by key so that compiled kernels and launchers are
    # not built again per candidate; None: the judge's own (TRITON_CACHE_DIR or ~/.triton/cache); "": none
    shared_cache: str | None = None
    # a writable Triton cache that outlives the candidate, shared by the candidates of one program only (made by the
    # judge: gates.candidate.kernel_cache); bound over the private dir's cache in the mount namespace. None: the
    # private dir's own, deleted with it
    kernel_cache: str | None = None


@dataclass(frozen=True)
class Mechanism:
    name: str  # short, stable: "uid", "netns", "pidns", "private_dir", "memory", ...
    applied: bool
    detail: str  # what was applied ("uid 65534"), or why it is not available


@dataclass(frozen=True)
class IsolationReport:
    mechanisms: tuple[Mechanism, ...]

    @property
    def applied(self) -> tuple[Mechanism, ...]:
        return tuple(m for m in self.mechanisms if m.applied)

    @property
    def unavailable(self) -> tuple[Mechanism, ...]:
        return tuple(m for m in self.mechanisms if not m.applied)

    def describe(self) -> str:
        """One line: `isolation: uid 65534, netns, ...; not available: pidns (reason), ...`."""
        line = "isolation: " + (", ".join(m.detail for m in self.applied) or "none")
        if self.unavailable:
            line += "; not available: " + ", ".join(f"{m.name} ({m.detail})" for m in self.unavailable)
        return line

    def to_json(self) -> list[list]:
        return [[m.name, m.applied, m.detail] for m in self.mechanisms]

    @classmethod
    def from_json(cls, data: list) -> IsolationReport:
        return cls(tuple(Mechanism(str(n), bool(a), str(d)) for n, a, d in data))


# linux/sched.h and linux/prctl.h: not exposed by Python 3.11's os module
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MOUNT_FLAGS = {"ro": MS_RDONLY, "nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC}
# the exit status of a waiter whose confined child vanished without a status, or of a candidate whose judge died
# before it was confined (named so it is recognizable)
LOST_CHILD = 70
# secrets the judge's environment may hold (model API keys): the candidate gets the rest
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")


# How memory past the limit comes back in the candidate (measured on the CPU and the H200, docs/security.md):
# MemoryError from Python and numpy, RuntimeError "DefaultCPUAllocator: can't allocate memory" from torch, and
# "out of memory" from CUDA's host allocations; a library that cannot handle a failed malloc dies of SIGSEGV/SIGABRT.
OUT_OF_MEMORY_SIGNS = ("can't allocate memory", "not enough memory", "out of memory", "Cannot allocate memory")


def looks_out_of_memory(exception_type: str, message: str) -> bool:
    """Whether an exception the candidate raised (its type name and message) is the memory limit being hit."""
    return exception_type in ("MemoryError", "OutOfMemoryError") or any(s in message for s in OUT_OF_MEMORY_SIGNS)


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    libc.unshare.argtypes = [ctypes.c_int]
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    return libc


def _errno_text() -> str:
    e = ctypes.get_errno()
    return f"{errno.errorcode.get(e, e)}: {os.strerror(e)}"


def _prctl(option: int, value: int) -> str | None:
    return None if _libc().prctl(option, value, 0, 0, 0) == 0 else _errno_text()


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> str | None:
    enc = [None if v is None else v.encode() for v in (source, target, fstype, data)]
    return None if _libc().mount(enc[0], enc[1], enc[2], flags, enc[3]) == 0 else _errno_text()


def confine(c: Confinement) -> IsolationReport:
    """Confine the calling process (a freshly forked, single-threaded child). What fails is reported, not raised;
    an exception out of here is a bug, and the caller must end the candidate rather than go on half confined.

    With a PID namespace the caller forks once more and never returns: it waits for the confined process (the
    namespace's init) and ends with the same status, so the judge sees the candidate's exit or signal on the pid it
    forked. `end_all(that pid)` then kills the waiter, whose death kills the namespace (PR_SET_PDEATHSIG on its init).
    """
    root = os.geteuid() == 0
    c = replace(c, shared_cache=_shared_cache(c))
    needed = _needed(c)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the waiter too dies with the judge; set again after the uid change
    if c.judge_pid is not None and os.getppid() != c.judge_pid:
        os._exit(LOST_CHILD)  # the judge is already gone: nobody is left to judge or to end this process
    found = [_own_group(), _no_core()]
    spaces, pidns = _unshare(c, root)
    found += spaces
    if pidns:
        found.append(_split_for_pid_namespace(c))
    masked, kernels = [], None
    if any(m.name == "mountns" and m.applied for m in found):
        found += _read_only_outside(c.private_dir, c.kernel_cache, needed)
        masked = _hide(c, needed, root)
        found.append(_mask_shared(c, needed))
        if any(m.name == "pidns" and m.applied for m in found):
            found.append(_own_proc())
    else:
        found.append(Mechanism("shared_dirs", False, "no mount namespace: path sockets under /tmp, /run reachable"))
        if c.kernel_cache:  # nothing is read-only to the candidate anyway: the directory itself
            kernels = c.kernel_cache
            found.append(Mechanism("kernel_cache", True, "program kernel cache (its own directory)"))
    found.append(_private_dir(c, root, kernels))
    found.append(_scrub_environment())
    found += _limits(c, root)
    found.append(_drop_user(c, root, needed))
    found.append(_death_signal())
    found.append(_flag("no_new_privs", PR_SET_NO_NEW_PRIVS, 1, "no_new_privs"))
    found.append(_flag("dumpable", PR_SET_DUMPABLE, 0, "not dumpable"))
    found += _checked_paths(c, masked)
    found.append(_close_fds(c.keep_fds))
    global _confined
    _confined = True
    return IsolationReport(tuple(found))


# set once `confine` ran in this process: what only a confined process may do (import a self-reference workload's
# original program, klineage.reference.original_model) asks `confined()` first
_confined = False


def confined() -> bool:
    """Whether this process confined itself (`confine`): a candidate or a reference process, never a judge."""
    return _confined


def _own_group() -> Mechanism:
    try:
        os.setpgid(0, 0)
    except OSError as e:
        return Mechanism("pgroup", False, str(e))
    return Mechanism("pgroup", True, "own process group")


def _no_core() -> Mechanism:
    # a core dump would write the process image (judge memory copied at the fork) outside the private directory
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return Mechanism("core", True, "no core dumps")


def _unshare(c: Confinement, root: bool) -> tuple[list[Mechanism], bool]:
    """The network, mount and PID namespaces (and, when not root, the user namespace that allows them)."""
    wanted = CLONE_NEWNS | (CLONE_NEWNET if c.network_namespace else 0) | (CLONE_NEWPID if c.pid_namespace else 0)
    found = []
    if not root:
        problem = _user_namespace(wanted)
        if problem:
            names = ["userns", "mountns"] + (["netns"] if c.network_namespace else [])
            names += ["pidns"] if c.pid_namespace else []
            return [Mechanism(n, False, problem) for n in names], False
        found.append(Mechanism("userns", True, f"user namespace (uid {os.getuid()} mapped to itself)"))
    elif _libc().unshare(wanted) != 0:
        problem = _errno_text()
        names = ["mountns"] + (["netns"] if c.network_namespace else []) + (["pidns"] if c.pid_namespace else [])
        return [Mechanism(n, False, f"unshare: {problem}") for n in names], False
    found.append(Mechanism("mountns", True, "mount namespace"))
    if c.network_namespace:
        found.append(Mechanism("netns", True, "netns (no interfaces)"))
    return found, c.pid_namespace


def _user_namespace(flags: int) -> str | None:
    """Unprivileged: a user namespace owning the others; the uid maps to itself, so files keep their owners."""
    uid, gid = os.getuid(), os.getgid()
    _prctl(PR_SET_DUMPABLE, 1)  # a process that changed uid is not dumpable: its /proc/self maps are root's
    if _libc().unshare(CLONE_NEWUSER | flags) != 0:
        return f"unshare(CLONE_NEWUSER): {_errno_text()} (a multithreaded process, or user namespaces disabled)"
    try:
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    except OSError as e:
        return f"uid map: {e}"
    return None


def _split_for_pid_namespace(c: Confinement) -> Mechanism:
    """Fork the namespace's init; this process becomes a waiter that mirrors its exit and never returns."""
    try:
        child = os.fork()
    except OSError as e:
        return Mechanism("pidns", False, f"fork into the namespace: {e}")
    if child:
        _wait_and_mirror(child)
    return Mechanism("pidns", True, "pidns")


def _wait_and_mirror(child: int) -> None:
    # the judge's pipes must see EOF when the confined process ends: the waiter keeps none of them open
    os.closerange(0, os.sysconf("SC_OPEN_MAX") if os.sysconf("SC_OPEN_MAX") > 0 else 1024)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(LOST_CHILD)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF if os.WIFEXITED(status) else LOST_CHILD)


def _mount_points() -> list[tuple[str, set[str]]]:
    """(mount point, its options) from mountinfo; the kernel escapes spaces and the like as octal."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        # no codec: the candidate's uid may not reach the standard library's lazily imported encodings
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        points.append((point, set(fields[5].split(","))))
    return points


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _read_only_outside(private_dir: str, kernel_cache: str | None = None, needed: list[str] = ()) -> list[Mechanism]:
    """Every mount read-only except the private directory (bound onto itself, with the program's kernel cache, if
    any, bound over its `triton`), /proc, /dev and a fresh /dev/shm (with what the candidate needs from the old one
    bound back read-only: a bench's input cache on a tmpfs).

    World-writable places (/tmp, /dev/shm) stay writable to any uid; only the mount namespace closes them. /proc
    stays writable because the NVIDIA driver (>= 570) writes /proc/self/task/*/comm; device nodes need no rw mount.
    """
    private = os.path.realpath(private_dir)
    problem = _mount(None, "/", None, MS_REC | MS_PRIVATE) or _mount(private, private, None, MS_BIND | MS_REC)
    if problem:
        lost = [Mechanism("kernel_cache", False, "no private mounts")] if kernel_cache else []
        return [Mechanism("read_only", False, f"private mounts: {problem}"), *lost]
    # before the remounts below (a bind of a read-only mount is read-only) and before _hide masks the data directory
    # the cache lives in: the candidate reaches it only at <private>/triton, never by its path
    kernels = [_bind_kernel_cache(kernel_cache, private)] if kernel_cache else []
    failed = []
    for point, options in _mount_points():
        if _inside(point, private) or _inside(point, "/proc") or point in ("/dev", "/dev/pts", "/dev/shm"):
            continue
        keep = sum(flag for name, flag in MOUNT_FLAGS.items() if name in options)
        keep |= 1024 if "noatime" in options else 0  # MS_NOATIME: locked in a user namespace, so carried over
        if _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | keep) and "ro" not in options:
            failed.append(f"{point}: {_errno_text()}")
    shm = _fresh_shm([k for k in needed if _inside(k, "/dev/shm") and k != "/dev/shm"])
    if shm:
        failed.append(f"/dev/shm: {shm}")
    if failed:
        return [Mechanism("read_only", False, "remount: " + "; ".join(failed[:3])), *kernels]
    return [Mechanism("read_only", True, "read-only outside the private dir"), *kernels]


def _bind_kernel_cache(kernel_cache: str, private: str) -> Mechanism:
    target = os.path.join(private, "triton")
    try:
        os.makedirs(target, exist_ok=True)
    except OSError as e:
        return Mechanism("kernel_cache", False, f"{target}: {e}")
    problem = _mount(os.path.realpath(kernel_cache), target, None, MS_BIND)
    if problem:  # the candidate then compiles into its private cache, as without one
        return Mechanism("kernel_cache", False, f"bind: {problem}")
    return Mechanism("kernel_cache", True, "program kernel cache")


def _shared_cache(c: Confinement) -> str | None:
    if c.shared_cache is not None:
        return c.shared_cache or None
    home = os.environ.get("TRITON_HOME") or os.path.expanduser("~")
    found = os.environ.get("TRITON_CACHE_DIR") or os.path.join(home, ".triton", "cache")
    return found if os.path.isdir(found) else None


def _needed(c: Confinement) -> list[str]:
    """What the candidate must still read: the interpreter (its standard library imports lazily), the installed
    packages already imported (torch, Triton: ptxas, libdevice, headers for the launcher), every site directory on
    sys.path (a program imports installed packages that may live apart from torch: `pip install --user`, a
    `--target` folder on PYTHONPATH), the shared Triton cache, and what the judge names; outermost paths only."""
    import sys

    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.__file__), *c.needs, *site_dirs()}
    for name in ("torch", "triton", "numpy"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            paths.add(os.path.dirname(os.path.dirname(module.__file__)))
    if c.shared_cache:
        paths.add(c.shared_cache)
    real = sorted({os.path.realpath(p) for p in paths if os.path.exists(p)})
    return [p for p in real if not any(q != p and _inside(p, q) for q in real)]


def site_dirs(packages: Iterable[str] = ()) -> list[str]:
    """The directories on sys.path that hold installed distributions (a `*.dist-info` or `*.egg-info` entry: where
    pip installs), or one of the top-level `packages` (a package on PYTHONPATH without a dist-info, whose modules a
    program carries rewritten copies of: the copy imports its package's other modules and their dependencies from
    there, and a masked /tmp hid them, fla's copy failed on `fla.backends`). The one rule of what site directories
    a confined process may read. A working directory or a project root on sys.path is neither, so it stays hidden
    where hidden."""
    import sys

    wanted = {p for p in packages if p}
    found = []
    for entry in sys.path:
        try:
            if entry and os.path.isdir(entry) and _holds_installed(os.listdir(entry), wanted):
                found.append(entry)
        except OSError:
            continue
    return found


def _holds_installed(names: list[str], packages: set[str]) -> bool:
    """A directory listing with a distribution's metadata, or one of `packages` (a folder or a module file)."""
    return any(
        name.endswith((".dist-info", ".egg-info")) or name in packages or name.removesuffix(".py") in packages
        for name in names
    )


def _hide(c: Confinement, needed: list[str], root: bool) -> list[str]:
    """An empty read-only tmpfs over each hidden directory, and over each directory whose mode would keep the
    dropped uid from what it needs (a Python installed under a 0700 home), with what the candidate needs from inside
    it bound back read-only at the same path. Returns the paths hidden this way."""
    masked = []
    private = os.path.realpath(c.private_dir)
    blockers = [b[0] for b in (blocking(k, c.uid, c.gid) for k in needed) if b and root]
    for path in sorted({*map(os.path.realpath, c.hidden), *blockers}, key=len):
        if any(_inside(path, m) for m in masked):
            continue
        if not os.path.isdir(path) or any(_inside(path, k) for k in [*needed, private]):
            continue  # a file, or inside what the candidate needs: mode bits and the uid must do
        inner = [k for k in needed if _inside(k, path)]
        with _opened(inner) as handles:
            if not _mask(path, inner, handles):
                masked.append(path)
    return masked


@contextlib.contextmanager
def _opened(paths: list[str]):
    """`paths` open as O_PATH handles for the block: reachable after a tmpfs covers where they are."""
    handles = [os.open(k, os.O_PATH) for k in paths]
    try:
        yield handles
    finally:
        for fd in handles:
            os.close(fd)


def _mask(path: str, inner: list[str], handles: list[int], writable: str = "") -> str | None:
    """An empty read-only tmpfs over `path`, with `inner` (open as `handles`) bound back: read-only, but for
    `writable` (the private dir, already its own read-write mount), bound back as it is."""
    ro = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
    problem = _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k,mode=0755")
    return problem or _bind_back(inner, handles, writable) or _mount(None, path, None, MS_REMOUNT | ro)


def _bind_back(inner: list[str], handles: list[int], writable: str = "") -> str | None:
    """Each of `inner` (open as `handles`) bound back at its path under a fresh tmpfs, read-only but `writable`."""
    for keep, fd in zip(inner, handles):
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            os.makedirs(keep, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(keep), exist_ok=True)
            Path(keep).touch()
        problem = _mount(f"/proc/self/fd/{fd}", keep, None, MS_BIND | MS_REC)
        if not problem and keep != writable:
            problem = _mount(None, keep, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
        if problem:
            return problem
    return None


def _fresh_shm(inner: list[str]) -> str | None:
    """A fresh, writable /dev/shm, with `inner` (paths in the old one) bound back read-only at their paths."""
    with _opened(inner) as handles:
        problem = _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64m,mode=1777")
        return problem or _bind_back(inner, handles)


# Shared places where another process may listen on a path socket (a desktop bus, a container daemon, a test's
# listener) or leave files: masked by an empty tmpfs in the candidate's mount namespace. A path socket is reached
# through a read-only mount (connect() needs no write access to the file system), and the network namespace stops
# only abstract sockets; /dev/shm is a fresh tmpfs already (_read_only_outside).
SHARED_DIRS = ("/tmp", "/var/tmp", "/run", "/var/run")


def _mask_shared(c: Confinement, needed: list[str]) -> Mechanism:
    """An empty tmpfs over each of SHARED_DIRS, with what the candidate needs from inside bound back (its private
    dir read-write, anything else it needs read-only)."""
    private = os.path.realpath(c.private_dir)
    done, failed, kept = [], [], 0
    for path in dict.fromkeys(os.path.realpath(p) for p in SHARED_DIRS):
        if not os.path.isdir(path) or any(_inside(path, k) for k in [*needed, private]):
            continue  # inside what the candidate needs: left as it is (read-only)
        inner = sorted((k for k in {*needed, private} if _inside(k, path)), key=len)
        with _opened(inner) as handles:
            problem = _mask(path, inner, handles, writable=private)
        if problem:
            failed.append(f"{path}: {problem}")
        else:
            done.append(path)
            kept += len(inner)
    if failed:
        return Mechanism("shared_dirs", False, f"mask: {'; '.join(failed)} ({', '.join(done) or 'none'} masked)")
    return Mechanism("shared_dirs", True, f"masked {', '.join(done) or 'nothing'} ({kept} bound back)")


def _own_proc() -> Mechanism:
    """/proc of the new PID namespace: the inherited one numbers processes as the judge sees them, so getpid() (1)
    names the host's init there, and CUDA's cuInit fails with 304 (measured on the H200, driver 580)."""
    problem = _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    return Mechanism("proc", not problem, problem or "own /proc")


def _private_dir(c: Confinement, root: bool, kernels: str | None = None) -> Mechanism:
    """HOME, TMPDIR and the like in the private directory; TRITON_CACHE_DIR its `triton` (where the mount namespace
    bound the program's kernel cache, if any), or `kernels`, the kernel cache's own path, without one."""
    path = Path(c.private_dir)
    try:
        cache = Path(kernels) if kernels else path / "triton"
        cache.mkdir(parents=True, exist_ok=True)
        linked = _layer_cache(cache, Path(c.shared_cache)) if c.shared_cache else 0
        if root:
            for p in (path, cache):
                os.chown(p, c.uid, c.gid)
        os.chmod(path, 0o700)
        os.chdir(path)
    except OSError as e:
        return Mechanism("private_dir", False, f"{path}: {e}")
    for name in ("HOME", "TMPDIR", "TMP", "TEMP", "XDG_CACHE_HOME"):
        os.environ[name] = str(path)
    os.environ["TRITON_CACHE_DIR"] = str(cache)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(path / "inductor")
    tempfile.tempdir = None  # tempfile caches the directory it found first: make it look again
    return Mechanism("private_dir", True, f"private dir ({linked} shared Triton cache entries, read-only)")


def _layer_cache(cache: Path, shared: Path) -> int:
    """Triton reads a kernel from `<cache>/<key>/`, writes only keys it lacks: a link per shared key gives the
    candidate every compiled kernel, read-only (judge-owned and, in the mount namespace, on a read-only mount)."""
    linked = 0
    for entry in os.scandir(shared) if shared.is_dir() else ():
        link = cache / entry.name
        if not link.exists():  # a program's kernel cache keeps the links of earlier candidates, and may dangle
            if os.path.islink(link):
                link.unlink()
            link.symlink_to(entry.path)
            linked += 1
    return linked


def _scrub_environment() -> Mechanism:
    """Unset variables that look like secrets, and blank them in the process's original environment block too
    (/proc/self/environ reads that block, which the fork copied from the warm server)."""
    names = [k for k in os.environ if any(w in k.upper() for w in SECRET_WORDS)]
    for name in names:
        del os.environ[name]
    try:
        fields = Path("/proc/self/stat").read_text().rpartition(")")[2].split()
        start, end = int(fields[47]), int(fields[48])  # env_start and env_end: fields 50 and 51 of proc(5)
        block = ctypes.string_at(start, end - start)
        offset = 0
        for entry in block.split(b"\0"):
            if entry.split(b"=", 1)[0].decode(errors="replace") in names:
                ctypes.memset(start + offset, 0, len(entry))
            offset += len(entry) + 1
    except (OSError, ValueError, IndexError) as e:
        return Mechanism("environment", False, f"environment block: {e}")
    return Mechanism("environment", True, f"{len(names)} secret variables removed")


def _status_bytes(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def _set(limit: int, value: int) -> str | None:
    try:
        resource.setrlimit(limit, (value, value))  # hard too: the candidate cannot raise it back
    except (OSError, ValueError) as e:
        return str(e)
    return None


def _limits(c: Confinement, root: bool) -> list[Mechanism]:
    found = []
    if c.memory_bytes is not None:
        # RLIMIT_AS on the CPU counts every mapping; CUDA reserves address space for the whole GPU (PROT_NONE), so
        # on a GPU only RLIMIT_DATA (private writable memory) can be tolerated. Both count from what is mapped now.
        limit, name, field = (
            (resource.RLIMIT_DATA, "RLIMIT_DATA", "VmData")
            if c.device == "cuda"
            else (resource.RLIMIT_AS, "RLIMIT_AS", "VmSize")
        )
        base = _status_bytes(field)
        problem = _set(limit, base + c.memory_bytes)
        detail = f"memory +{c.memory_bytes / 2**30:.1f} GiB ({name})"
        found.append(Mechanism("memory", not problem, problem or detail))
    if c.max_processes is not None:
        if root:
            problem = _set(resource.RLIMIT_NPROC, c.max_processes)
            found.append(Mechanism("nproc", not problem, problem or f"nproc {c.max_processes}"))
        else:
            found.append(Mechanism("nproc", False, "per-uid count would include the user's own processes"))
    if c.max_file_bytes is not None:
        problem = _set(resource.RLIMIT_FSIZE, c.max_file_bytes)
        found.append(Mechanism("fsize", not problem, problem or f"fsize {c.max_file_bytes >> 20} MiB"))
    if c.cpu_seconds is not None:
        problem = _set(resource.RLIMIT_CPU, c.cpu_seconds)
        found.append(Mechanism("cpu", not problem, problem or f"cpu {c.cpu_seconds} s"))
    return found


def blocking(path: str, uid: int, gid: int) -> tuple[str, str] | None:
    """The first directory on `path` (or `path` itself) whose mode bits keep `uid`/`gid` (no supplementary groups)
    from reading it, and why; None if it can."""
    target = Path(os.path.realpath(path))
    for i, part in enumerate([*reversed(target.parents), target]):
        try:
            st = os.stat(part)
        except OSError as e:
            return str(part), str(e)
        shift = 6 if st.st_uid == uid else 3 if st.st_gid == gid else 0
        bits = (st.st_mode >> shift) & 7
        last = i == len(target.parents)
        need = (4 | (1 if stat.S_ISDIR(st.st_mode) else 0)) if last else 1
        if bits & need != need:
            return str(part), f"{part} is mode {stat.S_IMODE(st.st_mode):o}, owner {st.st_uid}"
    return None


def _drop_user(c: Confinement, root: bool, needed: list[str]) -> Mechanism:
    if not root:
        return Mechanism("uid", False, f"not root: the candidate keeps uid {os.getuid()}")
    for path in needed:
        problem = blocking(path, c.uid, c.gid)
        if problem:  # the drop would break an honest candidate: keep root and say why
            return Mechanism("uid", False, f"needs {path}, unreadable to uid {c.uid}: {problem[1]}")
    try:
        os.setgroups([])
        os.setresgid(c.gid, c.gid, c.gid)
        os.setresuid(c.uid, c.uid, c.uid)
    except OSError as e:
        return Mechanism("uid", False, f"setuid: {e}")
    return Mechanism("uid", True, f"uid {c.uid}")


def _death_signal() -> Mechanism:
    # set after the uid change, which clears it; the parent is the judge, or the waiter when in a PID namespace
    problem = _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    return Mechanism("pdeathsig", not problem, problem or "pdeathsig")


def _flag(name: str, option: int, value: int, detail: str) -> Mechanism:
    problem = _prctl(option, value)
    return Mechanism(name, not problem, problem or detail)


def _checked_paths(c: Confinement, masked: list[str]) -> list[Mechanism]:
    """After the drop, as the candidate: what it must not read, and what it must."""
    found = []
    if c.hidden:
        left = [p for p in c.hidden if os.path.realpath(p) not in masked]
        seen = [p for p in left if os.path.exists(p) and os.access(p, os.R_OK)]
        how = f"{len(masked)} masked, {len(left) - len(seen)} by mode" if masked else "by mode"
        detail = f"readable: {', '.join(seen)}" if seen else f"hidden ({how})"
        found.append(Mechanism("hidden", not seen, detail))
    lost = [p for p in c.needs if not os.access(p, os.R_OK)]
    if lost:
        found.append(Mechanism("needs", False, f"cannot read {', '.join(lost)}"))
    return found


def _close_fds(keep: tuple[int, ...] | None) -> Mechanism:
    if keep is None:
        return Mechanism("fds", False, "not asked to close the judge's descriptors")
    low = 0
    for fd in sorted(set(keep)):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 20)
    return Mechanism("fds", True, f"fds {len(set(keep))} kept")


def end_all(pid: int) -> None:
    """Kill the candidate `pid` forked by the judge, its process group and (through it) its PID namespace.

    Does not reap: the judge waits for its own child. A confined init dies of its PR_SET_PDEATHSIG when the waiter
    `pid` dies, and the kernel then kills every process of its namespace, setsid() or not."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def make_private_dir(uid: int = NOBODY, gid: int = NOBODY, parent: str | None = None) -> Path:
    """A fresh directory for one evaluation, owned by the candidate's uid when running as root."""
    path = Path(tempfile.mkdtemp(prefix="klineage-candidate-", dir=parent))
    if os.geteuid() == 0:
        os.chown(path, uid, gid)
    return path


def remove_private_dir(path: Path) -> None:
    def writable(fn, p, _exc):
        # a candidate may leave a directory without permissions (matters when not root)
        os.chmod(os.path.dirname(p), 0o700)
        os.chmod(p, 0o700)
        fn(p)

    shutil.rmtree(path, onerror=lambda fn, p, e: _ignore(writable, fn, p, e))


def _ignore(handler, fn, p, exc) -> None:
    try:
        handler(fn, p, exc)
    except OSError:
        pass


def seal(path: str) -> str | None:
    """Make a judge-owned directory unreadable to others (mode 0700); the reason it could not, or None."""
    try:
        st = os.stat(path)
        if st.st_uid != os.geteuid():
            return f"{path} is owned by uid {st.st_uid}"
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.chmod(path, 0o700)
    except OSError as e:
        return str(e)
    return None
