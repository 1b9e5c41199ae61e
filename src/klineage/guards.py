"""Run-time and static guards used inside the sandbox while a program's forward runs.

- `Tracer` records every Triton launch (kernel, tensor storages passed, stream, thread): the proof that the program's
  kernels ran and that each output was written by one of them.
- `ForwardGuard` is a TorchDispatchMode active during forward: PyTorch compute ops fail (allocation, views, copies
  and casts are allowed) and every allocation is placed between two poisoned guard regions, its interior poisoned
  too, so unwritten outputs read as NaN and writes outside any buffer are found afterwards, on a CPU or a GPU
  (compute-sanitizer's memcheck misses such writes when they land inside the caching allocator's rounding).
- Thread and stream watches catch work hidden on a background thread or a side stream.
- `static_findings` rejects what no run-time guard sees: numpy compute, frame and environment inspection, ctypes,
  global precision switches.
"""

from __future__ import annotations

import ast
import functools
import operator
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace

from klineage.compare import POISON_BYTE, Finding

ALLOCATION_OPS = {
    "empty",
    "empty_strided",
    "empty_like",
    "zeros",
    "zeros_like",
    "ones",
    "ones_like",
    "full",
    "full_like",
    "new_empty",
    "new_empty_strided",
    "new_zeros",
    "new_ones",
    "new_full",
    "scalar_tensor",
}
ALLOWED_OPS = ALLOCATION_OPS | {
    # views and metadata
    "view",
    "_unsafe_view",
    "reshape",
    "_reshape_alias",
    "as_strided",
    "transpose",
    "t",
    "permute",
    "expand",
    "slice",
    "select",
    "unsqueeze",
    "squeeze",
    "unbind",
    "split",
    "split_with_sizes",
    "chunk",
    "narrow",
    "flatten",
    "unflatten",
    "alias",
    "detach",
    "diagonal",
    "movedim",
    "view_as_real",
    "view_as_complex",
    "lift_fresh",
    "_local_scalar_dense",
    "sym_size",
    "sym_stride",
    "sym_numel",
    "sym_storage_offset",
    "is_same_size",
    "is_contiguous",
    "stride",
    "size",
    "dim",
    "numel",
    "resize_",
    "set_",
    # copies, casts and initialization
    "copy_",
    "clone",
    "_to_copy",
    "contiguous",
    "lift_fresh_copy",
    "fill_",
    "zero_",
    "arange",
    # dtypes alone in, a dtype or a bool out: no tensor's data is read (FlagGems's cat, stack and kron wrappers ask
    # `torch.promote_types`; refusing them refused three correct programs, RESULTS.md#wild-gates)
    "promote_types",
    "result_type",
    "can_cast",
}
# copies whose result holds their source's bytes: a copy of what a kernel wrote was written by that kernel
# (FlagGems's index_select returns `out.permute(order).contiguous()`)
PROVENANCE_COPIES = {"clone", "_to_copy", "copy_", "contiguous", "lift_fresh_copy"}
# the higher-order operators a forward may call: `wrap_triton`'s launch of a Triton kernel (inside a `triton_op`)
TRITON_WRAPPERS = frozenset({"triton_kernel_wrapper_mutation", "triton_kernel_wrapper_functional"})
# PyTorch's own operator namespaces: an op outside them is a program's (or a library's) torch.library operator
BUILTIN_NAMESPACES = frozenset({"aten", "prims", "prim", "_c10d_functional", "c10d", "profiler"})


@dataclass
class Launch:
    kernel: str
    storages: frozenset[int]
    stream: int | None
    thread: int
    # what the launch asked for: its integer constexpr arguments by name, its warps and its program count (None where
    # the launcher left them to Triton or a grid could not be evaluated): a computed tile (`next_power_of_2(half)`)
    # has a size only here
    constexprs: tuple[tuple[str, int], ...] = ()
    num_warps: int | None = None
    programs: int | None = None
    # run-time arguments passed a Python float, which Triton types fp32: a pin to fp32 changes no code there
    floats: tuple[str, ...] = ()


@dataclass
class GuardedAllocation:
    buffer: object  # the uint8 tensor holding guard + interior + guard
    start: int  # interior byte range
    stop: int
    op: str


@dataclass
class Tracer:
    """Records Triton launches while `active`; patched into JITFunction.run and the interpreter once per process."""

    active: bool = False
    launches: list[Launch] = field(default_factory=list)
    depth: int = 0  # > 0 while Triton itself runs a launch (its own threads are not the program's)
    guard: object = None  # the forward's ForwardGuard while one runs: a launch's grid function runs under it

    def watched(self, call):
        """A program's callback (a grid function, a pre-run hook) that runs under the forward's guard: Triton calls
        it inside its launcher, where the ban is off for Triton's own tensor work. A `triton_op`'s grid that copied
        PyTorch's 2 * x + y into the output passed the correctness gate as a trusted program
        (tests/adversarial/programs/host_op_wrapped_grid_compute.py), as did a pre-run hook that copied softmax in
        (pre_run_hook_compute.py); a model's callbacks are refused before they run (policy.flow, launch callbacks).
        Metadata reads and allocations stay allowed, as in forward."""
        guard = self.guard
        if guard is None or not callable(call):
            return call

        def under_guard(*args, **kwargs):
            with guard:
                return call(*args, **kwargs)

        return under_guard

    def record(self, fn, args, kwargs, launcher=None, grid=None) -> None:
        import torch

        storages = set()
        for value in [*args, *kwargs.values()]:
            base = value if isinstance(value, torch.Tensor) else _wrapped_tensor(value)
            if isinstance(base, torch.Tensor):
                storages |= tensor_storages(base)
        stream = None
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            stream = torch.cuda.current_stream().cuda_stream
        name = getattr(fn, "__qualname__", None) or getattr(getattr(fn, "fn", None), "__qualname__", repr(fn))
        constexprs, programs, floats = (
            launch_shape(launcher, args, kwargs, grid) if launcher is not None else ((), None, ())
        )
        warps = kwargs.get("num_warps")
        self.launches.append(
            Launch(
                name,
                frozenset(storages),
                stream,
                threading.get_ident(),
                constexprs,
                warps if isinstance(warps, int) else None,
                programs,
                floats,
            )
        )


def _wrapped_tensor(value) -> object:
    """The tensor a pointer-like launch argument wraps: TensorDescriptor and TensorWrapper keep it in `.base`,
    FlagGems's StridedBuffer (its flip, glu, masked_fill outputs) in `._base`; without it their outputs read as
    never passed to a kernel (output_not_from_kernel on the H200, RESULTS.md#wild)."""
    import torch

    for attr in ("base", "_base"):
        inner = getattr(value, attr, None)
        if isinstance(inner, torch.Tensor):
            return inner
    return value


def launch_shape(launcher, args, kwargs, grid) -> tuple[tuple[tuple[str, int], ...], int | None, tuple[str, ...]]:
    """A launch's integer constexpr arguments by name, its program count and the names of its run-time arguments
    passed a Python float. `launcher` is the JITFunction or the interpreter's function; the grid, where a callable,
    gets the bound arguments as Triton passes them. Nothing here may fail a launch: what cannot be read is left
    out."""
    import inspect

    try:
        names = list(getattr(launcher, "arg_names", None) or inspect.signature(launcher.fn).parameters)
        bound = {**dict(zip(names, args)), **kwargs}
        params = getattr(launcher, "params", None)
        if params:
            constexpr = {p.name for p in params if getattr(p, "is_constexpr", False)}
        else:  # the interpreter keeps no parameter kinds: the annotations say which are constexpr
            constexpr = {
                n for n, p in inspect.signature(launcher.fn).parameters.items() if "constexpr" in str(p.annotation)
            }
        values = tuple(
            (n, v) for n, v in bound.items() if n in constexpr and isinstance(v, int) and not isinstance(v, bool)
        )
        floats = tuple(n for n, v in bound.items() if n not in constexpr and isinstance(v, float))
    except Exception:
        return (), None, ()
    try:
        shape = TRACER.watched(grid)(bound) if callable(grid) else grid  # its compute banned as Triton's call's is
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        programs = 1
        for n in shape:
            programs *= int(n)
    except TorchComputeError:  # a grid that computes fails the launch: nothing else here may
        raise
    except Exception:
        programs = None
    return values, programs, floats


TRACER = Tracer()
_installed = False


def install_tracer() -> None:
    """Wrap the launch entry points so every launch is recorded and runs outside the compute ban."""
    global _installed
    if _installed:
        return
    from torch.utils._python_dispatch import _disable_current_modes
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    def wrap(original):
        def run(self, *args, grid, warmup, **kwargs):
            watching = TRACER.active and not warmup
            if watching:
                TRACER.record(self.fn, args, kwargs, self, grid)
                grid = TRACER.watched(grid)
            TRACER.depth += 1
            try:
                # the launcher's own tensor ops (interpreter copies) are not forward's; the program's callbacks are
                with callbacks_watched(watching, self), _disable_current_modes():
                    return original(self, *args, grid=grid, warmup=warmup, **kwargs)
            finally:
                TRACER.depth -= 1

        return run

    JITFunction.run = wrap(JITFunction.run)
    InterpretedFunction.run = wrap(InterpretedFunction.run)
    _trace_compiled_launches()
    _installed = True


@contextmanager
def callbacks_watched(watching: bool, launcher: object = None):
    """For one launch (when `watching`) by `launcher` (a JITFunction, whose pre-run hooks Triton calls; None for a
    compiled kernel's runner, which calls none), every program callback Triton calls inside its launcher,
    where the ban is off for Triton's own work, runs under the forward's guard (`Tracer.watched`): the kernel's
    pre-run hooks (`add_pre_run_hook`), the launch enter/exit hooks (whose launch metadata a kernel's
    `launch_metadata` function fills when read) and the compile hooks. A pre-run hook that copied softmax into the
    output passed the correctness gate as a trusted program (tests/adversarial/programs/pre_run_hook_compute.py); a
    model's program cannot name these (policy: launch_hook, triton.knobs), a library's is not scanned. Swapped for
    the launch and put back: a hook Triton's own profiler hangs there runs watched too, and does no tensor work."""
    if not watching or TRACER.guard is None:
        yield
        return
    holders = [(launcher, "pre_run_hooks")] if launcher is not None else []
    try:
        from triton import knobs
    except ImportError:  # a Triton before knobs: its launch hooks are class attributes the policy refuses by name
        knobs = None
    if knobs is not None:
        runtime = knobs.runtime
        holders += [(runtime.launch_enter_hook, "calls"), (runtime.launch_exit_hook, "calls")]
        holders += [(runtime, "jit_cache_hook"), (runtime, "jit_post_compile_hook")]
    swapped = []
    for holder, attr in holders:
        value = getattr(holder, attr, None)
        if isinstance(value, list) and value:
            setattr(holder, attr, [TRACER.watched(call) for call in value])
        elif callable(value):
            setattr(holder, attr, TRACER.watched(value))
        else:
            continue
        swapped.append((holder, attr, value))
    try:
        yield
    finally:
        for holder, attr, value in reversed(swapped):
            setattr(holder, attr, value)


def _trace_compiled_launches() -> None:
    """Record a launch made through a compiled kernel directly (`compiled[grid](*args)`), as libraries that cache
    what `JITFunction.run` returned do: FlagGems's `@libentry` launches so from its second call on, and 22 of the
    first 28 wild starts failed `no_kernel_launch` on the H200 on the run made like a user's call (the second run),
    though their kernels ran (RESULTS.md#wild). `JITFunction.run` launches through `CompiledKernel.run`, not this
    way, so a launch is recorded once; one made inside another launcher (depth > 0) is that launcher's."""
    from torch.utils._python_dispatch import _disable_current_modes

    try:
        from triton.compiler.compiler import CompiledKernel
    except ImportError:  # a Triton without it launches only through JITFunction.run
        return
    original = CompiledKernel.__getitem__

    def getitem(self, grid):
        runner = original(self, grid)

        def traced(*args, stream=None):
            watching = TRACER.active and not TRACER.depth
            if watching:
                jit = getattr(getattr(self, "src", None), "fn", None)  # the ASTSource's JITFunction, if any
                fn = getattr(jit, "fn", None) or SimpleNamespace(__qualname__=getattr(self, "name", "compiled kernel"))
                TRACER.record(fn, args, {}, jit, tuple(grid))
            TRACER.depth += 1
            try:
                # a compiled kernel's runner calls no pre-run hooks: only the launch and compile hooks to watch
                with callbacks_watched(watching), _disable_current_modes():
                    return runner(*args, stream=stream)
            finally:
                TRACER.depth -= 1

        return traced

    CompiledKernel.__getitem__ = getitem


def guarded_empty(
    shape, stride, dtype, device, guard_bytes: int, op: str, log: list, shift_bytes: int = 0, noise: int = 0
) -> object:
    """A tensor of `shape`/`stride` inside a poisoned buffer with `guard_bytes` of poison on each side. With `noise`
    (a seed), the interior holds random finite values instead of poison, as a plain allocation might: a kernel that
    reads a fresh buffer cannot tell a judged call from a user's by its contents (unwritten outputs then show as a
    mismatch, not as poison)."""
    import torch

    itemsize = torch.empty((), dtype=dtype).element_size()
    numel_span = 1 + sum((s - 1) * st for s, st in zip(shape, stride)) if all(s > 0 for s in shape) else 0
    nbytes = numel_span * itemsize
    padded = -(-nbytes // 256) * 256  # keep the interior end on a 256-byte boundary, as the caching allocator does
    size = 2 * guard_bytes + padded + 512
    if torch.device(device).type == "cpu":
        buffer = fenced_host_buffer(size)
    else:
        buffer = torch.empty(size, dtype=torch.uint8, device=device)
    buffer.fill_(POISON_BYTE)
    start = (-buffer.data_ptr()) % 256 + guard_bytes  # interior 256-byte aligned, like a caching-allocator block
    start += shift_bytes  # a probe may misalign it on purpose
    log.append(GuardedAllocation(buffer, start, start + nbytes, op))
    made = buffer.view(dtype).as_strided(tuple(shape), tuple(stride), start // itemsize)
    if noise and nbytes:
        _fill_noise(made, noise + len(log))
    return made


def _fill_noise(t, seed: int) -> None:
    """Random finite values in `t` (normal for floating dtypes, small integers otherwise); zeros where the dtype has
    no random fill."""
    import torch

    g = torch.Generator(device=t.device).manual_seed(seed & (2**63 - 1))
    try:
        if t.is_floating_point():
            t.normal_(generator=g)
        elif t.dtype == torch.bool:
            t.random_(0, 2, generator=g)
        else:
            t.random_(0, 100, generator=g)
    except (RuntimeError, TypeError, NotImplementedError):
        t.zero_()


# Poison finds a stray store only inside the guard region; a store further away lands in someone else's memory and
# is not seen. On the CPU the pages beyond the poisoned guards are mapped PROT_NONE: a store there (or a read) faults
# at once, and the candidate dies of SIGSEGV (a `crash` verdict). No access is free of it up to FENCE_MAX past the
# guard; the fence costs address space only (counted by RLIMIT_AS), no memory.
FENCE_MIN = 1 << 20
FENCE_MAX = 64 << 20


def fenced_host_buffer(size: int) -> object:
    """`size` writable bytes (a uint8 CPU tensor) between two PROT_NONE fences of max(1 MiB, size) up to 64 MiB.

    The tensor holds the mapping (torch.frombuffer keeps a reference), so the fences go when the tensor does."""
    import ctypes
    import mmap

    import torch

    page = mmap.PAGESIZE
    body = -(-size // page) * page
    fence = -(-min(max(FENCE_MIN, body), FENCE_MAX) // page) * page
    region = mmap.mmap(-1, fence + body + fence, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    for start in (base, base + fence + body):
        if libc.mprotect(start, fence, 0) != 0:  # PROT_NONE (not in 3.11's mmap)
            raise OSError(ctypes.get_errno(), "mprotect of a guard fence")
    return torch.frombuffer(region, dtype=torch.uint8, count=size, offset=fence)


def check_guards(log: list[GuardedAllocation]) -> Finding | None:
    for i, alloc in enumerate(log):
        bad_before = _unpoisoned(alloc.buffer[: alloc.start])
        bad_after = _unpoisoned(alloc.buffer[alloc.stop :])
        if bad_before or bad_after:
            where = f"{bad_before} before its start" if bad_before else f"{bad_after} after its end"
            return Finding(
                "out_of_bounds_write",
                f"bytes written outside allocation #{i} ({alloc.op}, {alloc.stop - alloc.start} bytes): {where}",
            )
    return None


def _unpoisoned(guard) -> int:
    """How many bytes of a guard region (a uint8 tensor) no longer hold the poison. A host buffer is counted by
    numpy on one thread: torch's comparison and sum run on its OpenMP pool, and on a loaded 2-core machine a pool
    thread that is not scheduled held each check of 2 x 64 KiB for up to 0.1 s (the median is 0.16 ms; numpy's
    0.02 ms), which made up a fifth to a half of a CPU correctness check (benchmarks/gate_cost.py,
    docs/BENCHMARKS.md section 3)."""
    if guard.device.type == "cpu":
        import numpy as np

        return int(np.count_nonzero(guard.numpy() != POISON_BYTE))
    return int((guard != POISON_BYTE).sum())


def _make_forward_guard(guard_bytes: int, host_ops: frozenset[str] = frozenset(), noise: int = 0):
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class ForwardGuard(TorchDispatchMode):
        """Bans compute, guards allocations. Findings are collected, not raised, so one run reports all of them;
        the first banned op still raises so the forward stops before computing anything with PyTorch."""

        def __init__(self):
            super().__init__()
            self.allocations: list[GuardedAllocation] = []
            self.banned: list[str] = []
            self.derived: set[int] = set()  # storages a workload-allowed host op computed from kernel outputs

        # a higher-order operator comes here too: `wrap_triton`'s launch inside a `triton_op` body (torchao's
        # mx_block_rearrange) raised "no rule registered" once the body was watched
        supports_higher_order_operators = True

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if isinstance(func, torch._ops.HigherOrderOperator):
                if func.name() not in TRITON_WRAPPERS:  # another's eager code is not ours to vouch for
                    self.banned.append(func.name())
                    raise TorchComputeError(f"higher-order operator {func.name()} inside forward")
                # its eager implementation, watched like a body (a wrapped launch's grid function included)
                with self:
                    return func.dispatch(torch._C.DispatchKey.CompositeExplicitAutograd, *args, **kwargs)
            name = func.overloadpacket.__name__
            if name not in ALLOWED_OPS and name not in host_ops:
                self.banned.append(name)
                raise TorchComputeError(f"PyTorch compute op {func.namespace}.{name} inside forward")
            if func.namespace not in BUILTIN_NAMESPACES:
                # an operator a program defines (torch.library: torchao's wrap their kernels) is allowed by its name
                # only: its body is the program's too, and run unwatched it computed `2 * x + y` into a buffer a
                # zeros kernel had been handed, and passed (tests/adversarial/programs/host_op_body_compute.py)
                return self._watched_body(func, args, kwargs)
            out = func(*args, **kwargs)
            if name in host_ops and name not in ALLOWED_OPS:
                # provenance flows through an allowed host op: a sum of kernel-written partials counts as written.
                # What a functional op hands back sharing its inputs' storage is a view that moved no data (a
                # sparse tensor built from its parts, a part read back): it keeps its own provenance, or a
                # kernel-written values tensor would vouch for the host-made indices beside it. An in-place or out=
                # op's output is the buffer it wrote: derived, as before.
                inputs = _storages_of([*args, *kwargs.values()])
                if inputs & self.written():
                    self.derived |= _storages_of([out]) - (set() if func._schema.is_mutable else inputs)
            elif name in PROVENANCE_COPIES:
                # a copy's source only: `out.copy_(host_values)` into a buffer a kernel was handed stays unproven
                # (tests/adversarial/programs/noop_kernel_copy_host.py)
                source = args[1:2] if name == "copy_" else args[:1]
                if _storages_of(source) & self.written():
                    self.derived |= _storages_of([out])
            if name in ALLOCATION_OPS and isinstance(out, torch.Tensor) and out.numel():
                guarded = guarded_empty(
                    out.shape, out.stride(), out.dtype, out.device, guard_bytes, name, self.allocations, noise=noise
                )
                if name not in ("empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided"):
                    guarded.copy_(out)  # zeros/ones/full keep their values; only the guards are poison
                return guarded
            return out

        def _watched_body(self, func, args, kwargs):
            """A program-defined operator run by its backend's kernel with this guard watching what it calls (the
            mode is off while it handles an op; it goes on again for the body). Only the keys below Python's are
            dispatched to, or the call would come back here. Its outputs' provenance is what its body did: they
            are not derived from its inputs, as an allowed aten op's are."""
            import torch

            below = torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.Python)
            tensors = _tensors_in([*args, *kwargs.values()])
            if tensors:
                keys = functools.reduce(operator.or_, map(torch._C._dispatch_keys, tensors)) & below
            else:
                keys = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)  # what an op of no tensor dispatches to
            with self:
                return func.redispatch(keys, *args, **kwargs)

        def written(self) -> set[int]:
            """Storages a kernel of this forward was handed, or derived from them on the host."""
            return self.derived.union(*(launch.storages for launch in TRACER.launches))

    return ForwardGuard()


def _tensors_in(values) -> list:
    """The tensors among an op's arguments, a list or tuple of them looked into one level deep."""
    import torch

    return [
        item
        for value in values
        for item in (value if isinstance(value, (list, tuple)) else [value])
        if isinstance(item, torch.Tensor)
    ]


def _storages_of(values) -> set[int]:
    return set().union(*map(tensor_storages, _tensors_in(values)))


def tensor_storages(tensor) -> set[int]:
    """The data pointers of the storages a tensor's elements live in, by which the guards follow data: what a launch
    was handed, what a host op derived, what an output is, what a later call returned again. A strided tensor has
    one (none when empty). A sparse tensor has none of its own (`untyped_storage()` raises "Cannot access storage
    of SparseCsrTensorImpl": torchao's bsr_dense_addmm, whose program builds a BSR tensor in forward, failed
    forward_error): its parts' storages, indices and values, each a tensor the program made or was handed. A wrapper
    subclass (a jagged nested tensor, a tensor subclass of torchao's) has its inner tensors'. A meta tensor has no
    data: none, so it can neither vouch for an output nor be vouched for."""
    import torch
    from torch.utils._python_dispatch import _disable_current_modes, is_traceable_wrapper_subclass

    if tensor.is_meta:
        return set()
    if is_traceable_wrapper_subclass(tensor):
        names, _ = tensor.__tensor_flatten__()
        parts = [getattr(tensor, n) for n in names]
    elif tensor.layout == torch.strided:
        return {tensor.untyped_storage().data_ptr()} if tensor.numel() else set()
    else:
        # the accessors are ops: outside the forward's compute ban (they read parts, compute nothing)
        with _disable_current_modes():
            if tensor.layout == torch.sparse_coo:
                parts = [tensor._indices(), tensor._values()]
            elif tensor.layout in (torch.sparse_csr, torch.sparse_bsr):
                parts = [tensor.crow_indices(), tensor.col_indices(), tensor.values()]
            elif tensor.layout in (torch.sparse_csc, torch.sparse_bsc):
                parts = [tensor.ccol_indices(), tensor.row_indices(), tensor.values()]
            else:  # a layout without parts to follow (none other in torch 2.x): no storage to name
                return set()
    return set().union(*(tensor_storages(p) for p in parts if isinstance(p, torch.Tensor)))


class TorchComputeError(RuntimeError):
    pass


class BackgroundThreadError(RuntimeError):
    pass


class SideStreamError(RuntimeError):
    pass


@contextmanager
def watch_threads(found: list):
    """Fail a thread started inside forward: work there escapes both timing and the launch order."""
    original = threading.Thread.start

    def start(self, *a, **k):
        if TRACER.depth:
            return original(self, *a, **k)
        found.append(self.name)
        raise BackgroundThreadError(f"forward started a background thread ({self.name})")

    threading.Thread.start = start
    try:
        yield
    finally:
        threading.Thread.start = original


@contextmanager
def watch_streams(found: list):
    """Fail a switch to another CUDA stream inside forward: events on the caller's stream would not time the work.
    (Stream objects themselves are harmless: `torch.cuda.current_stream()` builds one on every call. A kernel
    launched on another stream by other means is caught by the launch trace.)"""
    import torch

    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        yield
        return
    main = torch.cuda.current_stream()
    original_set = torch.cuda.set_stream

    def set_stream(stream):
        if stream is not None and stream != main:
            found.append("torch.cuda.set_stream")
            raise SideStreamError("forward switched to another CUDA stream")
        return original_set(stream)

    torch.cuda.set_stream = set_stream
    try:
        yield
    finally:
        torch.cuda.set_stream = original_set


@dataclass
class ForwardRecord:
    launches: list[Launch]
    allocations: list[GuardedAllocation]
    banned: list[str]
    threads: list[str]
    streams: list[str]
    derived: set[int] = field(default_factory=set)


@contextmanager
def guarded_forward(guard_bytes: int, host_ops: frozenset[str] = frozenset(), noise: int = 0):
    """Everything a forward call runs under; yields the record filled in when the block exits. `noise`: fresh
    allocations hold random values (seeded) instead of poison (guarded_empty)."""
    record = ForwardRecord([], [], [], [], [])
    mode = _make_forward_guard(guard_bytes, host_ops, noise)
    TRACER.launches = []
    TRACER.active = True
    TRACER.guard = mode
    try:
        with watch_threads(record.threads), watch_streams(record.streams), mode:
            yield record
    finally:
        TRACER.active = False
        TRACER.guard = None
        record.launches = list(TRACER.launches)
        record.allocations = mode.allocations
        record.banned = mode.banned
        record.derived = mode.derived


def launch_findings(record: ForwardRecord, outputs: list, main_stream: int | None) -> Finding | None:
    """A forward with no Triton launch, with launches off the caller's stream or thread, or with an output that no
    kernel was handed, did not compute its answer with its kernels."""
    import torch

    if not record.launches:
        return Finding("no_kernel_launch", "forward launched no Triton kernel")
    main_thread = threading.get_ident()
    for launch in record.launches:
        if launch.thread != main_thread:
            return Finding("background_thread", f"kernel {launch.kernel} launched from another thread")
        if main_stream is not None and launch.stream is not None and launch.stream != main_stream:
            return Finding("side_stream", f"kernel {launch.kernel} launched on a side stream")
    written = record.derived.union(*(launch.storages for launch in record.launches))
    for i, out in enumerate(outputs):
        if not isinstance(out, torch.Tensor) or not out.numel():
            continue
        # every storage an output reads was written: a sparse output's indices as well as its values, since both
        # are its answer; one with none (meta) was written by nothing
        storages = tensor_storages(out)
        if not storages or not storages <= written:
            return Finding("output_not_from_kernel", f"output {i} was never passed to a Triton kernel")
    return None


# --- static scan ------------------------------------------------------------------------------------------------

BANNED_CALLS = {
    "numpy": "moves data to numpy (compute outside Triton)",
    "from_numpy": "builds a tensor from numpy data",
    "_getframe": "inspects the caller's frames",
    "currentframe": "inspects the caller's frames",
    "_make_subclass": "builds a Tensor subclass",
    "set_float32_matmul_precision": "changes global matmul precision",
    "get_objects": "walks the garbage collector's objects",
}
BANNED_MODULES = {"ctypes": "raw memory access", "inspect": "frame inspection", "gc": "object graph access"}
BANNED_ATTRIBUTES = {"allow_tf32": "changes global matmul precision", "environ": "reads the environment"}


def static_findings(sources: dict[str, str], lines: dict[str, set[int]] | None = None) -> list[Finding]:
    """Scan program sources (label -> source) for constructs no run-time guard can see. `lines`: for a label, the
    only line numbers that count (a carried copy of an installed module: the lines a rewrite wrote)."""
    lines = lines or {}
    findings = []
    for label, source in sources.items():
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            what = None
            if isinstance(node, ast.Call):
                callee = node.func
                name = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", None)
                what = BANNED_CALLS.get(name) and f"{name}(): {BANNED_CALLS[name]}"
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                for n in names:
                    root = n.split(".")[0]
                    if root in BANNED_MODULES:
                        what = f"import {n}: {BANNED_MODULES[root]}"
            elif isinstance(node, ast.Attribute) and node.attr in BANNED_ATTRIBUTES:
                what = f".{node.attr}: {BANNED_ATTRIBUTES[node.attr]}"
            if what and (label not in lines or node.lineno in lines[label]):
                findings.append(Finding("static_ban", f"{label} line {node.lineno}: {what}"))
    return findings
