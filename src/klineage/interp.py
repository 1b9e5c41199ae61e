"""Closing the gaps of Triton 3.6's interpreter that real expert kernels hit, so they run on a CPU.

1. Float scalar arguments stay Python floats, so `eps.to(tl.float32)` fails (Liger's RMSNorm): wrap them as fp32
   scalars, which is what a compiled launch passes (Triton mangles a Python float to `fp32`).
2. `@triton.autotune` benchmarks through the GPU driver: emulate the benchmark by running every pruned config's
   kernel call twice (pre- and post-hooks included, exactly as `Autotuner._bench` does) and picking the first.
   Running the configs matters: an accumulating kernel tuned without `reset_to_zero` returns garbage on its first
   call on a real GPU (seen on the H200), and the emulation reproduces that on the CPU. Inside a correctness check
   gates.AutotunePicks replaces this with its own choice of config (every config, one pass each).
3. bf16 arithmetic works on raw uint16 bits (the interpreter stores bf16 as uint16): `tl.dot`, binary and unary
   ops on bf16 return garbage (a bf16 `silu(a) * b` gave 1e36). Widen bf16 operands to fp32, compute, and round
   the result back to bf16 (round to nearest even, as the hardware does); `tl.dot` keeps its fp32 accumulator.
4. `triton.language.extra.libdevice` functions (Liger's `rsqrt`) are stubs that return None outside the compiler:
   bind them to `tl.math` (patched by the interpreter inside a kernel) or to numpy.
5. numpy >= 2.3 refuses `int()` of a one-element array, which the interpreter's `tl.tensor.__index__` does: every
   `range(0, n_cols, BLOCK)` over a run-time bound failed (Liger's cross-entropy and the attention expert, on the
   H200 image's numpy 2.5.2, RESULTS.md#run-15; numpy 2.4.6 here). Index through `.item()`, which every numpy accepts.

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

    original_dot = interpreter.InterpreterBuilder.create_dot

    def widen(handle):
        if handle.dtype.scalar == tl.bfloat16:
            data = (handle.data.astype(np.uint32) << 16).view(np.float32)
            return interpreter.TensorHandle(data, tl.float32)
        return handle

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        return original_dot(self, widen(a), widen(b), d, input_precision, max_num_imprecise_acc)

    interpreter.InterpreterBuilder.create_dot = create_dot
    original_lang_tensor = interpreter._patch_lang_tensor

    def patch_lang_tensor(tensor, scope):
        original_lang_tensor(tensor, scope)
        # after the interpreter's own `int(self.handle.data)`; the scope restores both, last first
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))

    interpreter._patch_lang_tensor = patch_lang_tensor
    _patch_bf16_arithmetic(interpreter, widen)
    _patch_libdevice()
    _patched = True


def _to_bf16_bits(values):
    """float32 array -> bf16 bit patterns (uint16), round to nearest even; NaN stays NaN."""
    import numpy as np

    values = np.asarray(values, dtype=np.float32)
    bits = values.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(values), np.uint16(0x7FC0), rounded)


def _patch_bf16_arithmetic(interpreter, widen) -> None:
    import numpy as np
    import triton.language as tl

    comparisons = {np.less, np.greater, np.less_equal, np.greater_equal, np.equal, np.not_equal}
    original_binary = interpreter.InterpreterBuilder.binary_op
    original_unary = interpreter.InterpreterBuilder.unary_op

    def binary_op(self, lhs, rhs, op):
        if lhs.dtype.scalar != tl.bfloat16 and rhs.dtype.scalar != tl.bfloat16:
            return original_binary(self, lhs, rhs, op)
        out = op(widen(lhs).data, widen(rhs).data)
        if op in comparisons:  # as the original: a 0/1 array carried in the operand's dtype
            return interpreter.TensorHandle(out.astype(np.uint16), tl.bfloat16)
        return interpreter.TensorHandle(_to_bf16_bits(out), tl.bfloat16)

    def unary_op(self, arg, op):
        if arg.dtype.scalar != tl.bfloat16:
            return original_unary(self, arg, op)
        return interpreter.TensorHandle(_to_bf16_bits(op(widen(arg).data)), tl.bfloat16)

    interpreter.InterpreterBuilder.binary_op = binary_op
    interpreter.InterpreterBuilder.unary_op = unary_op
    # a bf16 scalar constant (`z * 2` on a bf16 tensor) needs a builder method the interpreter lacks
    interpreter.InterpreterBuilder.get_bf16 = lambda self, value: interpreter.TensorHandle(
        _to_bf16_bits(np.array([value], dtype=np.float32)), tl.bfloat16
    )


# libdevice name -> numpy function, for names tl.math does not have
_NUMPY_LIBDEVICE = {
    "tanh": "tanh",
    "pow": "power",
    "fast_expf": "exp",
    "fast_logf": "log",
    "fast_powf": "power",
    "exp10": None,
    "sinh": "sinh",
    "cosh": "cosh",
    "atan": "arctan",
    "asin": "arcsin",
    "acos": "arccos",
    "log1p": "log1p",
    "expm1": "expm1",
    "round": "round",
    "trunc": "trunc",
    "isnan": "isnan",
    "isinf": "isinf",
    "signbit": "signbit",
    "fmax": "fmax",
    "fmin": "fmin",
    "atan2": "arctan2",
    "hypot": "hypot",
    "tan": "tan",
    "erf": None,
}


def _patch_libdevice() -> None:
    import math

    import numpy as np
    import triton.language as tl
    import triton.language.extra.libdevice as libdevice
    import triton.runtime.interpreter as interpreter

    def via_math(name):
        def fn(*args, **kwargs):
            return getattr(tl.math, name)(*args)

        return fn

    def via_numpy(np_fn):
        def fn(*args, **kwargs):
            first = next(a for a in args if isinstance(a, tl.tensor))
            arrays = [a.handle.data if isinstance(a, tl.tensor) else np.asarray(a) for a in args]
            out = np.asarray(np_fn(*arrays))
            if out.dtype != np.bool_:
                out = out.astype(first.handle.data.dtype)
            scalar = tl.int1 if out.dtype == np.bool_ else first.dtype.scalar
            ty = tl.block_type(scalar, first.type.shape) if first.type.is_block() else scalar
            return tl.tensor(interpreter.TensorHandle(out, scalar), ty)

        return fn

    numpy_fns = {k: getattr(np, v) for k, v in _NUMPY_LIBDEVICE.items() if v}
    numpy_fns["exp10"] = lambda x: np.power(10.0, x)
    numpy_fns["erf"] = np.vectorize(math.erf, otypes=[np.float64])
    for name in dir(libdevice):
        stub = getattr(libdevice, name)
        if name.startswith("_") or not callable(stub) or getattr(stub, "__module__", "") != libdevice.__name__:
            continue
        base = name.removesuffix("_rn")
        if hasattr(tl.math, base) and callable(getattr(tl.math, base)):
            setattr(libdevice, name, via_math(base))
        elif base in numpy_fns:
            setattr(libdevice, name, via_numpy(numpy_fns[base]))
