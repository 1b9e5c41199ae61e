"""CUDA mapped to the CPU (klineage.cuda_on_cpu) answers the torch internals that host code reads once CUDA is
available: `torch._C`'s raw stream (bitsandbytes binds it at import), the CUDA generator's state (torch.compile saves
and restores it around each frame), `torch.cuda.init()`, `torch.accelerator` (bitsandbytes's Triton backend picks
its device module by it). `install()` is for the rest of a process's life, so each
case runs in a child of its own; no kernel runs (no interpreter)."""

import subprocess
import sys

SCRIPT = """
import torch
from klineage import cuda_on_cpu
cuda_on_cpu.install()

# bitsandbytes/backends/cuda/ops.py, module level, and functional._get_tensor_stream
get_raw_stream = torch._C._cuda_getCurrentRawStream
assert get_raw_stream(0) == 0 == torch.cuda.current_stream().cuda_stream
assert torch._C._cuda_getCurrentStream(0)[:2] == (0, 0)
assert torch._C._cuda_getDevice() == 0
torch._C._cuda_setDevice(0)
torch._C._cuda_synchronize()

# the generator of `device="cuda"` tensors, saved and restored as torch._dynamo.convert_frame does
state = torch.cuda.get_rng_state()
first = torch.randn(8, device="cuda")
torch.cuda.set_rng_state(state)
assert torch.equal(torch.randn(8, device="cuda"), first)
torch.cuda.set_rng_state_all(torch.cuda.get_rng_state_all())
assert torch.equal(torch.cuda.default_generators[0].get_state(), torch.get_rng_state())

# bitsandbytes.functional.check_matmul: `if not torch.cuda.is_initialized(): torch.cuda.init()`
torch.cuda.init()
assert not torch.cuda.is_initialized()  # the harness's own stream checks read it: still off
assert not torch.cuda._is_compiled()  # torch.cuda's own paths still know there is no CUDA runtime

# bitsandbytes/backends/triton/ops.py, module level: its device module picked by the accelerator
device_type = torch.accelerator.current_accelerator().type
assert device_type == "cuda" and getattr(torch, device_type) is torch.cuda
assert torch.accelerator.is_available() and torch.accelerator.device_count() == 1
assert torch.accelerator.current_device_index() == 0
with torch.accelerator.device_index(0):
    torch.accelerator.synchronize()
assert not torch.accelerator.current_stream().is_capturing()  # torch.optim's graph-capture check
print(" ".join(u for u in cuda_on_cpu.used() if "rng" in u or "_C." in u or "init" in u or "accelerator" in u))
"""


def test_torch_internals_that_host_code_reads_answer_for_the_mapped_device():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == [
        "torch._C._cuda_getCurrentRawStream",
        "torch._C._cuda_getCurrentStream",
        "torch._C._cuda_getDevice",
        "torch._C._cuda_setDevice",
        "torch._C._cuda_synchronize",
        "torch.cuda.get_rng_state",
        "torch.cuda.set_rng_state",
        "torch.cuda.init",
        "torch.accelerator.current_accelerator",
        "torch.accelerator.is_available",
        "torch.accelerator.device_count",
        "torch.accelerator.current_device_index",
        "torch.accelerator.device_index",
        "torch.accelerator.synchronize",
        "torch.accelerator.current_stream",
    ]


WHERE = """
import types
import torch
from klineage import cuda_on_cpu
cuda_on_cpu.install()

program = types.ModuleType("a_wrapper")  # a program's module, or a package it calls
exec(
    "def where(t):\\n"
    "    return (str(t.device), t.is_cuda, t.is_cpu, t.get_device(), t.device.type == 'cuda')\\n"
    "def beside(t):\\n"
    "    return torch.empty(2, device=t.device), t.new_zeros(1).to(t.device), t.to(t.device)\\n",
    program.__dict__,
)
program.torch = torch
harness = types.ModuleType("klineage.some_gate")  # the gates read the truth
exec("def where(t):\\n    return (str(t.device), t.is_cuda, t.is_cpu, t.get_device())\\n", harness.__dict__)

x = torch.ones(3, device="cpu")
print(program.where(x))
print(harness.where(x))
print(program.where(torch.empty(2, device="meta")))  # only a CPU tensor reads as the mapped device
print(*(harness.where(t)[0] for t in program.beside(x)))  # allocated beside an input: on the CPU
print(" ".join(cuda_on_cpu.used()))
"""


def test_a_program_reads_its_tensors_on_the_mapped_device_and_torch_and_the_gates_read_the_cpu():
    done = subprocess.run([sys.executable, "-c", WHERE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        "('cuda:0', True, False, 0, True)",
        "('cpu', False, True, -1)",
        "('meta', False, False, -1, False)",
        "cpu cpu cpu",
        # the device read and the allocations beside it are not noted: device-agnostic code does both
        "Tensor.is_cuda Tensor.is_cpu Tensor.get_device()",
    ]
