"""Closing the gaps of Triton 3.6's interpreter that real expert kernels hit, so they run on a CPU.

1. Float scalar arguments stay Python floats, so `eps.to(tl.float32)` fails (Liger's RMSNorm): wrap them as fp32
   scalars, which is what a compiled launch passes (Triton mangles a Python float to `fp32`).
2. `@triton.autotune` benchmarks through the GPU driver: emulate the benchmark by running every pruned config's
   kernel call twice (pre- and post-hooks included, exactly as `Autotuner._bench` does) and picking the first.
   Running the configs matters: an accumulating kernel tuned without `reset_to_zero` returns garbage on its first
   call on a real GPU (seen on the H200), and the emulation reproduces that on the CPU.
3. numpy >= 2.3 breaks `range(tl.cdiv(K, BK))`; the package pins numpy < 2.3 instead of patching.

Apply in the sandbox process, after setting TRITON_INTERPRET=1 and before any kernel is defined."""

from __future__ import annotations

import itertools

_patched = False


def patch_interpreter() -> None:
    global _patched
    if _patched:
        return
    import numpy as np
    import triton.language as tl
    import triton.runtime.autotuner as autotuner
    import triton.runtime.interpreter as interpreter

    original_cvt = interpreter._implicit_cvt

    def implicit_cvt(arg):
        if isinstance(arg, float):
            handle = interpreter.TensorHandle(np.array([arg], dtype=np.float32), tl.float32)
            return tl.tensor(handle, tl.float32)
        return original_cvt(arg)

    interpreter._implicit_cvt = implicit_cvt

    order = itertools.count()

    def emulated_bench(kernel_call, quantiles=None):
        # two calls: a benchmark always runs a config more than once, which is what exposes accumulation bugs
        kernel_call()
        kernel_call()
        rank = float(next(order))  # increasing: the first config of each tuning wins, deterministically
        return [rank, rank, rank]

    autotuner.Autotuner.do_bench = property(lambda self: emulated_bench)
    _patched = True
