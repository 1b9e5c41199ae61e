"""CUDA host code on the CPU, unchanged: a program written for a GPU is checked on a laptop.

Real Triton wrappers are CUDA-only on the host side: they allocate with `device="cuda"`, call `.cuda()`, enter
`torch.cuda.device(x.device)`, read the current device and stream, ask how many SMs the GPU has, synchronize. On a
CPU-only PyTorch each of these raises ("Torch not compiled with CUDA enabled") before a kernel runs, so 12 of 21
verbatim third-party programs failed their start on the CPU (issue 31). `install()` maps the CUDA device to the CPU
in the process that imports and runs the program (the correctness gate's candidate process, the compile gate's CPU
path), before the program is imported:

- devices: a `device=` argument that names CUDA ("cuda", "cuda:0", `torch.device("cuda")`, an integer index) and
  `Tensor.to("cuda")` become the CPU, `Tensor.cuda()` returns the tensor, `pin_memory()` and `record_stream()` are
  no-ops. A TorchFunctionMode does this, so it holds for every factory (`torch.empty`, `zeros`, `full`, `tensor`,
  `arange`, `empty_like`, `new_empty`, ...) without listing them.
- where a tensor lives, as the program reads it (`x.device`, `x.is_cuda`, `x.is_cpu`, `x.get_device()`): CUDA
  device 0 for a CPU tensor, read by the program or a package it calls; torch, Triton and the harness read the
  truth. Wrappers assert it or pick their Triton path by it (a CPU fallback would be a different program, or
  PyTorch computing).
- `torch.cuda`: `is_available()` is True (what real wrappers test before taking their Triton path),
  `device_count()` 1, `current_device()` 0, `set_device`, the `device(...)` / `device_of(...)` contexts,
  `synchronize`, streams (`current_stream`, `default_stream`, `Stream`, `stream(...)`, `set_stream`) and events are
  no-ops on the CPU (one device, one queue: program order is execution order), `get_device_properties`,
  `get_device_capability` and `get_device_name` describe an H200 (sm_90, 132 SMs, 141 GiB, 50 MiB of L2, 227 KiB
  of opt-in shared memory per block: SHARED_MEMORY_LIMIT[90] of the compile gate), `is_bf16_supported()` True,
  `init()` a no-op. `torch.cuda.is_initialized()` stays False: the harness's own stream checks read it and must stay
  off on the CPU. The CUDA generator is the CPU's (`get_rng_state`, `set_rng_state`, `default_generators`), which
  `device="cuda"` tensors draw from: torch.compile saves and restores it around every frame it compiles.
- `torch.accelerator`, PyTorch's device-generic front: `current_accelerator()` is `cuda`, `is_available()` True,
  one device, index 0, its stream and `synchronize` as torch.cuda's. Host code picks its device module by it
  (bitsandbytes's Triton backend: `torch.accelerator.current_accelerator().type` at import, None on a CPU-only
  build, so the module did not import).
- `torch._C`: the CUDA bindings that host code binds for itself (`_cuda_getCurrentRawStream`, which bitsandbytes
  reads at import and Inductor's generated code calls; `_cuda_getCurrentStream`, `_cuda_getDevice`, ...) answer
  for device 0 and stream 0.
- Triton's driver: `triton.runtime.driver.active` is a stand-in whose current device is 0, current stream 0,
  target `GPUTarget("cuda", 90, 32)`, and `utils.get_device_properties` the H200's (persistent kernels size their
  grid by `multiprocessor_count`).
- `GEMS_VENDOR=nvidia` unless set: FlagGems asks the OS (`nvidia-smi`) which vendor's GPU this is, and the mapped
  device is an NVIDIA one.

What is mapped is only the device: kernels still run through the Triton interpreter on CPU tensors, and the
gates' guards see those tensors as they see any other (the dispatch-level compute ban, poisoned allocations and
output provenance run below this mapping). `used()` lists what the program used, in first-use order; the gates put
it in their evidence as `cuda_mapped`, so a verdict says that a CUDA program was checked with CUDA mapped to the
CPU.

Nothing here may run in the judge: it answers questions about a GPU that is not there."""

from __future__ import annotations

import contextlib
import os
from types import SimpleNamespace

# The device the mapping describes: an H200 (sm_90) as torch and the CUDA driver report it (RESULTS.md#run-21's
# loader limit for shared memory; 132 SMs on the H100 SXM and H200 alike).
CAPABILITY = (9, 0)
SM_COUNT = 132
DEVICE_NAME = "NVIDIA H200"
PROPERTIES = {
    "name": DEVICE_NAME,
    "major": CAPABILITY[0],
    "minor": CAPABILITY[1],
    "total_memory": 150_754_820_096,
    "multi_processor_count": SM_COUNT,
    "is_integrated": 0,
    "is_multi_gpu_board": 0,
    "max_threads_per_multi_processor": 2048,
    "max_threads_per_block": 1024,
    "warp_size": 32,
    "regs_per_multiprocessor": 65536,
    "shared_memory_per_block": 49152,
    "shared_memory_per_block_optin": 232448,
    "shared_memory_per_multiprocessor": 233472,
    "L2_cache_size": 52_428_800,
    "clock_rate": 1_980_000,
    "memory_clock_rate": 3_201_000,
    "memory_bus_width": 6144,
    "gcnArchName": "NVIDIA H200",
    "uuid": "00000000-0000-0000-0000-000000000000",
    "pci_bus_id": 0,
    "pci_device_id": 0,
    "pci_domain_id": 0,
}
# what Triton's CUDA driver reports (triton/backends/nvidia/driver.c get_device_properties)
DRIVER_PROPERTIES = {
    "max_shared_mem": 232448,
    "max_num_regs": 65536,
    "multiprocessor_count": SM_COUNT,
    "warpSize": 32,
    "sm_clock_rate": 1_980_000,
    "mem_clock_rate": 3_201_000,
    "mem_bus_width": 6144,
}

_used: list[str] = []
_installed = False


def used() -> list[str]:
    """What the program used of CUDA, mapped to the CPU, in first-use order (empty: nothing)."""
    return list(_used)


def _note(what: str) -> None:
    """Note `what` as used, unless the call came from the harness itself (guards.py asks whether CUDA is up on
    every launch) rather than from the program or a package it calls: the first caller outside this module and the
    libraries both run on (`_LIBRARIES`) decides."""
    import sys

    frame = sys._getframe(1)
    while frame is not None and (frame.f_globals.get("__name__") == __name__ or _package(frame) in _LIBRARIES):
        frame = frame.f_back
    if what not in _used and not (frame is not None and _package(frame) == "klineage"):
        _used.append(what)


# The libraries a program and the harness both run on: their frames never say whose use it is. One list for
# `_note` (who used CUDA) and `_read_by_program` (who reads a tensor's device).
_LIBRARIES = ("torch", "triton", "numpy")


def _package(frame) -> str:
    return (frame.f_globals.get("__name__", "") or "").split(".", 1)[0]


def installed() -> bool:
    return _installed


def install() -> None:
    """Map CUDA to the CPU in this process, for the rest of its life. Idempotent."""
    global _installed
    if _installed:
        return
    import torch

    os.environ.setdefault("GEMS_VENDOR", "nvidia")
    _patch_torch_cuda(torch)
    _patch_triton_driver(torch)
    _CudaToCpu().__enter__()  # never left: the candidate process ends with the program
    _installed = True


# --- devices ------------------------------------------------------------------------------------------------------


def _is_cuda(device) -> bool:
    import torch

    if isinstance(device, str):
        return device == "cuda" or device.startswith("cuda:")
    if isinstance(device, torch.device):
        return device.type == "cuda"
    return type(device) is int  # an integer device index means a CUDA device in PyTorch


_NOT_A_READ = object()
MAPPED_DEVICE = None  # torch.device("cuda", 0) once a mode is made; `_mapped` maps it back silently


def _where_reads(torch):
    """`where(func, args)`: for a program's read of where a CPU tensor lives (`x.device`, `x.is_cuda`, `x.is_cpu`,
    `x.get_device()`), what it reads on the GPU; `_NOT_A_READ` for anything else. The device it reads is one
    object, `MAPPED_DEVICE`, so that allocating beside an input (`device=x.device`) maps back to the CPU without a
    note: device-agnostic code reads `x.device` only for that, and the evidence names what is CUDA's alone."""
    global MAPPED_DEVICE
    base = torch._C.TensorBase
    real_device = base.__dict__["device"].__get__
    MAPPED_DEVICE = torch.device("cuda", 0)
    answers = {
        base.__dict__["device"]: ("", MAPPED_DEVICE),
        base.__dict__["is_cuda"]: ("Tensor.is_cuda", True),
        base.__dict__["is_cpu"]: ("Tensor.is_cpu", False),
        base.get_device: ("Tensor.get_device()", 0),
    }

    def where(func, args):
        read = answers.get(getattr(func, "__self__", None) if type(func).__name__ == "method-wrapper" else func)
        if read is None or not args or real_device(args[0]).type != "cpu" or not _read_by_program(3):
            return _NOT_A_READ
        if read[0]:
            _note(read[0])
        return read[1]

    return where


def _read_by_program(depth: int) -> bool:
    """Whether the code reading a tensor's device (the frame above the mode's handler) is the program or a package
    it calls, not the harness, torch or Triton: real wrappers assert `x.is_cuda` or `x.device.type == "cuda"`
    (FlagGems's upsample_nearest2d, t_copy, _safe_softmax), or pick their Triton path over a CPU fallback by it
    (in the installed FlagGems, Liger-Kernel, flash-linear-attention and triton_kernels, 170 modules read
    `is_cuda`, `is_cpu` or `device.type`: 31 of FlagGems's 251 ops, 15 of Liger-Kernel's, 15 of fla.ops'), while
    torch, Triton's interpreter and the gates must see the CPU tensors they work on."""
    import sys

    return _package(sys._getframe(depth)) not in (*_LIBRARIES, "klineage")


def _mapped(device, what: str):
    """`device`, or the CPU where it names CUDA (noting `what` was used)."""
    if device is not None and device is MAPPED_DEVICE:
        return "cpu"
    if device is not None and _is_cuda(device):
        _note(what)
        return "cpu"
    return device


def _make_mode():
    import torch
    from torch.overrides import TorchFunctionMode

    tensor = torch.Tensor
    returns_self = {tensor.cuda: "Tensor.cuda()", tensor.pin_memory: "Tensor.pin_memory()"}
    no_op = {tensor.record_stream: "Tensor.record_stream()"}
    compiling = torch.compiler.is_compiling
    where = _where_reads(torch)

    class CudaToCpu(TorchFunctionMode):
        """Every torch call with a CUDA device argument gets the CPU instead, and a program reading where its
        tensors live reads CUDA."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            # torch.compile traces this handler into every graph: the read is answered outside it (a compiled
            # graph reads no device: its guards hold the tensors' own)
            if not compiling():
                read = where(func, args)
                if read is not _NOT_A_READ:
                    return read
            kwargs = dict(kwargs or {})
            if func in returns_self:
                _note(returns_self[func])
                return args[0]
            if func in no_op:
                _note(no_op[func])
                return None
            if "device" in kwargs:
                kwargs["device"] = _mapped(kwargs["device"], "device='cuda'")
            if func is tensor.to and len(args) > 1 and not isinstance(args[1], (torch.dtype, torch.Tensor)):
                args = (args[0], _mapped(args[1], "Tensor.to('cuda')"), *args[2:])
            if kwargs.get("pin_memory"):
                kwargs["pin_memory"] = False
            return func(*args, **kwargs)

    return CudaToCpu


class _CudaToCpu:
    """The TorchFunctionMode, built on first use (importing torch here would import it in every process)."""

    def __new__(cls):
        return _make_mode()()


# --- torch.cuda ---------------------------------------------------------------------------------------------------


class _Stream:
    """A CUDA stream on the CPU: one queue, already in order."""

    cuda_stream = 0
    device_index = 0
    priority = 0

    def __init__(self, device=None, priority=0, **kwargs) -> None:
        _note("torch.cuda.Stream")

    @property
    def device(self):
        import torch

        return torch.device("cpu")

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True

    def is_capturing(self) -> bool:  # torch.optim's graph-capture check asks the accelerator's stream
        return False

    def wait_stream(self, stream) -> None:
        pass

    def wait_event(self, event) -> None:
        pass

    def record_event(self, event=None):
        return event if event is not None else _Event()

    def __eq__(self, other) -> bool:
        return isinstance(other, _Stream)

    def __hash__(self) -> int:
        return 0

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


class _Event:
    def __init__(self, enable_timing=False, blocking=False, interprocess=False) -> None:
        _note("torch.cuda.Event")

    def record(self, stream=None) -> None:
        pass

    def wait(self, stream=None) -> None:
        pass

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end) -> float:
        raise RuntimeError("no GPU time on the CPU (CUDA is mapped to the CPU)")


class _DeviceContext:
    """`torch.cuda.device(i)` / `device_of(x)` / `torch.accelerator.device_index(i)`: one device, nothing to
    switch."""

    def __init__(self, device=None) -> None:
        self.idx = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False


def _noted(what: str, value):
    """A stand-in for `what` that notes its use and returns `value` (called, where it is a function)."""

    def fn(*args, **kwargs):
        _note(what)
        return value() if callable(value) else value

    fn.__name__ = what.rsplit(".", 1)[-1]
    return fn


def _patch_torch_cuda(torch) -> None:
    cuda = torch.cuda
    noted = _noted

    def properties(device=None):
        _note("torch.cuda.get_device_properties")
        return SimpleNamespace(**PROPERTIES)

    def device_context(what):
        def make(device=None):
            _note(what)
            return _DeviceContext(device)

        return make

    def get_rng_state(device="cuda"):
        _note("torch.cuda.get_rng_state")
        return torch.get_rng_state()

    def set_rng_state(new_state, device="cuda") -> None:
        _note("torch.cuda.set_rng_state")
        torch.set_rng_state(new_state)

    def set_rng_state_all(new_states) -> None:
        for state in new_states:
            set_rng_state(state)

    main_stream = _Stream.__new__(_Stream)  # made without noting: the harness reads it too
    replacements = {
        "is_available": noted("torch.cuda.is_available", True),
        "device_count": noted("torch.cuda.device_count", 1),
        "current_device": noted("torch.cuda.current_device", 0),
        "set_device": noted("torch.cuda.set_device", None),
        "synchronize": noted("torch.cuda.synchronize", None),
        "get_device_capability": noted("torch.cuda.get_device_capability", CAPABILITY),
        "get_device_name": noted("torch.cuda.get_device_name", DEVICE_NAME),
        "get_device_properties": properties,
        "is_bf16_supported": noted("torch.cuda.is_bf16_supported", True),
        "current_stream": noted("torch.cuda.current_stream", main_stream),
        "default_stream": noted("torch.cuda.default_stream", main_stream),
        "set_stream": noted("torch.cuda.set_stream", None),
        "stream": lambda stream=None: (_note("torch.cuda.stream"), contextlib.nullcontext(stream))[1],
        "Stream": _Stream,
        "Event": _Event,
        "device": device_context("torch.cuda.device"),
        "device_of": device_context("torch.cuda.device_of"),
        "empty_cache": noted("torch.cuda.empty_cache", None),
        "manual_seed": noted("torch.cuda.manual_seed", None),
        "manual_seed_all": noted("torch.cuda.manual_seed_all", None),
        "init": noted("torch.cuda.init", None),
        # the mapped device's generator is the CPU's, which `device="cuda"` tensors draw from. torch.compile saves
        # and restores it around every frame it compiles (torch._dynamo.convert_frame) once CUDA is available.
        "default_generators": (torch.default_generator,),
        "get_rng_state": get_rng_state,
        "set_rng_state": set_rng_state,
        "get_rng_state_all": lambda: [get_rng_state()],
        "set_rng_state_all": set_rng_state_all,
    }
    for name, value in replacements.items():
        setattr(cuda, name, value)
    _patch_torch_c(torch)
    _patch_torch_accelerator(torch, main_stream)


def _patch_torch_accelerator(torch, main_stream) -> None:
    """torch.accelerator answering for the mapped CUDA device (its own functions read the CPU-only build's device
    module, which has none)."""
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is None:  # a torch before 2.6
        return
    noted = _noted

    def current_accelerator(check_available=False):
        _note("torch.accelerator.current_accelerator")
        return torch.device("cuda")

    def device_index(device=None):
        _note("torch.accelerator.device_index")
        return _DeviceContext(device)

    replacements = {
        "current_accelerator": current_accelerator,
        "is_available": noted("torch.accelerator.is_available", True),
        "device_count": noted("torch.accelerator.device_count", 1),
        "current_device_index": noted("torch.accelerator.current_device_index", 0),
        "current_device_idx": noted("torch.accelerator.current_device_idx", 0),
        "set_device_index": noted("torch.accelerator.set_device_index", None),
        "set_device_idx": noted("torch.accelerator.set_device_idx", None),
        "device_index": device_index,
        "current_stream": noted("torch.accelerator.current_stream", main_stream),
        "set_stream": noted("torch.accelerator.set_stream", None),
        "synchronize": noted("torch.accelerator.synchronize", None),
        "empty_cache": noted("torch.accelerator.empty_cache", None),
    }
    for name, value in replacements.items():
        if hasattr(accelerator, name):
            setattr(accelerator, name, value)


def _patch_torch_c(torch) -> None:
    """The CUDA bindings in `torch._C` that host code reads for itself: bitsandbytes and Inductor's generated code
    take the raw stream from `torch._C._cuda_getCurrentRawStream` (bitsandbytes at import, once CUDA is available),
    which a CPU-only build lacks. Each answers for the one mapped device and its one queue, stream 0 as Triton's
    driver reports it. `_cuda_getDeviceCount` stays missing: its presence is how torch tells it was built with
    CUDA (`torch.cuda._is_compiled()`), and with it torch.cuda and fake tensors would call into a CUDA runtime
    that is not there."""
    cuda_stream = (0, 0, 1)  # torch.cuda.Stream's (stream_id, device_index, device_type): the default, on cuda:0
    bindings = {
        "_cuda_getCurrentRawStream": 0,
        "_cuda_getCurrentStream": cuda_stream,
        "_cuda_getDefaultStream": cuda_stream,
        "_cuda_getDevice": 0,
        "_cuda_setDevice": None,
        "_cuda_synchronize": None,
    }
    for name, value in bindings.items():
        if not hasattr(torch._C, name):  # a CUDA build has the real one (install() never runs there)
            setattr(torch._C, name, _noted(f"torch._C.{name}", value))


# --- Triton's driver ----------------------------------------------------------------------------------------------


class _Utils:
    def get_device_properties(self, device=None) -> dict:
        _note("driver.active.utils.get_device_properties")
        return dict(DRIVER_PROPERTIES)


def _patch_triton_driver(torch) -> None:
    """Triton's active driver as a stand-in: with `torch.cuda.is_available()` True, Triton would otherwise build
    its CUDA driver (a C extension over libcuda) on first use."""
    from triton.backends.compiler import GPUTarget
    from triton.runtime.driver import driver

    class MappedDriver:
        """Triton's CUDA driver as host code queries it, for the one mapped device."""

        utils = _Utils()
        backend = "cuda"

        @staticmethod
        def is_active() -> bool:
            return True

        def get_current_device(self) -> int:
            _note("driver.active.get_current_device")
            return 0

        def set_current_device(self, device) -> None:
            pass

        def get_current_stream(self, device=None) -> int:
            _note("driver.active.get_current_stream")
            return 0

        def get_device_capability(self, device=None) -> tuple[int, int]:
            _note("driver.active.get_device_capability")
            return CAPABILITY

        def get_current_target(self):
            _note("driver.active.get_current_target")
            return GPUTarget("cuda", CAPABILITY[0] * 10 + CAPABILITY[1], 32)

        def get_active_torch_device(self):
            _note("driver.active.get_active_torch_device")
            return torch.device("cpu")

        def get_device_interface(self):
            return torch.cuda

        def get_empty_cache_for_benchmark(self):
            return torch.empty(1024, dtype=torch.int32)

        def clear_cache(self, cache) -> None:
            cache.zero_()

        def map_python_to_cpp_type(self, ty: str) -> str:
            from triton.backends.nvidia.driver import ty_to_cpp

            return ty_to_cpp(ty)

    mapped = MappedDriver()
    driver._default = mapped  # reset_active() returns here too, never to a CUDA driver over a missing libcuda
    driver.set_active(mapped)
