"""The quantization suite (`wild-quant`): real Triton kernels whose launches their package does not tune.

Across every GPU run of the wild suite (FlagGems and triton_kernels, RESULTS.md#wild-h100-4) four instances ever kept
a change, each by 1.4-5.6%: FlagGems's kernels are tuned, and the methods tie within noise. This suite takes real
kernels from two installed packages whose launches are fixed by hand, where a method has room to differ. Built as the
wild suite is (klineage.suites.wild: a `WildKernel` per entry, the program its own reference, a `pytorch.py` beside
it that only classifies a rejected start), and held to its disjointness rule (no lineage is mined from either
package: `wild.rule_violations`).

The selection rule, fixed before the suite's first bench run (written after a survey that imported and ran the two
packages' wrappers on the CPU under the interpreter, for correctness only; nothing was timed; RESULTS.md#wild-quant):
- packages: bitsandbytes 0.50.2 (`bitsandbytes.backends.triton.kernels_*`) and torchao 0.18.0 (`torchao.*`);
- an entry per module-level wrapper function that launches a `@triton.jit` kernel of its package, where **no launch
  of the wrapper goes through a `@triton.autotune` of two or more configs** (a one-config autotuner is a fixed
  launch); a wrapper with a tuned launch is left out;
- left out also, each with its reason in `LEFT_OUT`: kernels gated to sm_100 (an H100 or H200 cannot run them),
  multi-GPU communication, host code that needs a package not installed, and a wrapper whose every kernel another
  entry already launches the same way (a near-duplicate module);
- one bench size per entry: its main operand holds 2^24 elements (4096 x 4096, or that many shaped as the wrapper
  requires: a multiple of its block), bf16 where the wrapper asserts it, else fp32; a matmul is 4096 x 4096 x 4096;
- the reference is the program itself; the classifying workload's `Model` is the package's own PyTorch equivalent
  where it ships one, else PyTorch code written here.
"""

from __future__ import annotations

from klineage.suites.wild import WildKernel

# wrappers the rule leaves out, with why (the package's own words where it raises)
LEFT_OUT: dict[str, str] = {}


def catalogue() -> tuple[WildKernel, ...]:
    """Every entry, in a fixed order (the suite's instance order)."""
    return ()
