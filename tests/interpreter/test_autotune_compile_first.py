"""An autotuner on a shared GPU compiles its configurations before it takes the GPU alone (timing.autotuners_alone,
`_compile_configs`): the exclusive turn holds only its benchmarks. On the CPU the compile is real (Triton's bundled
compiler for sm_90, CUDA mapped by klineage.cuda_on_cpu); the benchmark, which needs a GPU, is replaced by a
recorder of what was compiled when it began."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.interpreter

SCRIPT = """
import sys
from klineage.cuda_on_cpu import install
install()
import torch, triton, triton.language as tl
from triton.runtime import autotuner
from klineage import sandbox, timing

@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 64}, num_warps=2),
        triton.Config({"BLOCK": 128}, num_warps=4),
        triton.Config({"BLOCK": 2**24}, num_warps=4),  # past Triton's largest block: does not compile
    ],
    key=["n"],
)
@triton.jit
def double(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

asked, seen = [], []
sandbox.broker_turns(lambda kind, entering: asked.append((kind, entering)))
sandbox.take_turns(sandbox.GpuTurns("", sys.argv[1]))
def benchmark(self, *args, **kwargs):  # the autotuner's own run: what had been compiled when it began
    seen.append(sum(len(c[0]) for c in self.fn.device_caches.values()))
    seen.append(list(asked))
autotuner.Autotuner.run = benchmark
with timing.autotuners_alone():
    double[(1,)](torch.empty(1000, device="cuda"), 1000)
print(seen[0], seen[1])
"""


@pytest.mark.parametrize("hold, compiled", [("work", 2), ("yield", 0)])
def test_an_autotuner_compiles_its_configurations_before_it_has_the_gpu_alone(hold, compiled, tmp_path):
    """Under the default turns both configurations that compile are compiled before the exclusive turn is asked
    for (the third fails to compile and is left to the benchmark); under the comparison arm `yield`, none are, as
    before."""
    script = tmp_path / "tune.py"  # a file: triton.jit reads its kernel's source
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script), hold], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    count, asked = done.stdout.split(maxsplit=1)
    assert int(count) == compiled
    assert asked.strip() == "[('exclusive', True)]"
