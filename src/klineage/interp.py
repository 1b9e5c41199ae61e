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
6. Host code that introspects `@triton.jit` objects wants a JITFunction: FlagGems's LibEntry (in front of every
   FlagGems kernel) walks `.fn` to one, reads `.params`, `.signature`, `.cache_key`, and relaunches the kernel that
   `run()` returned; the import of flag_gems failed. `triton.jit` makes an InterpretedFunction that is a JITFunction
   to such code, and whose `run()` returns a relaunchable handle (_patch_jit_introspection).
7. `a and b`, `a or b`, `not a` on tensors: Python asks `bool(a)`, which the interpreter answers from one element, so
   `mask = (offs < N) and (offs >= 0)` was `offs >= 0` alone and a correct kernel stored out of bounds. The compiler
   makes them elementwise logical ops (code_generator.visit_BoolOp); an AST rewrite of each kernel does the same
   (_patch_bool_ops).
8. Bool arguments became int1 tensors holding int32 data; `tl.dtype.value` (FlagGems's utils/limits.py) did not
   exist (_patch_small_gaps).
   `triton.language.extra.cuda.libdevice` (imported directly by kernels) has stubs of its own: bound as in 4.

9. `range` / `tl.range` loop variables were Python ints; the compiler makes them int32 (int64 with an int64
   bound) scalar tensors, and FLA's chunk_h.py calls `i_t.to(tl.int64)` on one. The same rewrite wraps each such
   loop's values (`tl.static_range` keeps its ints, as in the compiler).
10. `tl.reduce` / `tl.associative_scan` with a combine function of the kernel's own (Welford's in FlagGems's var
   and std, a product, cummax's value-index pairs) ran the combine once per element in Python: a 128x128 var took
   over 300 s and timed out its gate. The same left fold, vectorized over every other axis
   (_patch_reduce_scan_loops).
11. Integer overflow checks whose assert is a no-op (`debug` off) were computed for every int32 `+ - *`, over half
   of an index-heavy kernel's time; off unless `debug` is on, as in effect compiled (_patch_dead_overflow_checks).
12. Casts to fp8 rounded wrongly: `_convert_float` adds the round-up bit to the truncated mantissa and ORs the sum
   into the exponent field, so a carry out of the mantissa is lost whenever the exponent's low bit is 1 (124.3 ->
   float8e4nv gave 64, not 128); ties went away from zero, the subnormal range truncated, an overflow or inf became
   NaN's code (the GPU saturates), and widening read inf and NaN codes as numbers. torchao's fp8 blockwise
   quantizers came out 2x off on ~2% of their elements (19 of 1024). Every conversion to or from an fp8 type rounds
   here as the compiled cast does (_patch_fp8_casts).
13. A grid given as a list (`kernel[[g0, g1]]`, as torch.sparse._triton_ops.launch_kernel launches torchao's
   bsr_dense_addmm) failed on `grid + (1,)`; the compiled launcher indexes any sequence. It is a tuple here
   (_patch_list_grid).
14. Casts to bf16 truncated: `cast_impl` sends fp32 -> bf16 (every `x.to(tl.bfloat16)` and every store of an fp32
   value through a bf16 pointer; fp16 -> bf16 goes by fp32) to `_convert_float` with no rounding mode, where the
   compiled cast (cvt.rn.bf16.f32) rounds to nearest even: 2035 of 4096 random values one unit off torch's cast, and
   an overflow stuck at the largest finite. fp64 and integers -> bf16 made `astype(uint16)` of the value, not its
   bits; bf16 subnormals widened to garbage; `fp_downcast_rounding="rtz"` made NaN of an fp16 overflow (round toward
   zero gives the largest finite), inf of a NaN, garbage of an fp32 subnormal, and raised on an fp64 zero or
   subnormal. torchao's inverse Hadamard transform (`x.to(tl.bfloat16)` of its fp32 result) had 1006 of 2048 bf16
   outputs one unit off that result rounded to nearest even (0 now). Every conversion between float types, and from
   an integer to bf16, rounds once from the exact value as the compiled cast does (_patch_fp8_casts,
   _patch_cast_impl).

15. Per op, the interpreter rebuilds Triton's frontend type objects from scratch (a tensor's shape tuple and its
   formatted type name, a block type's validated shape, a dict of dtypes): most of an op's time, 300 s and a timeout
   for FlagGems's radix sort. Cached per shape and dtype, the same objects (_patch_frontend_overhead).

CUDA in host code (`device="cuda"`, `torch.cuda.*`, Triton's driver) is not the interpreter's: klineage.cuda_on_cpu.

Apply in the sandbox process, after setting TRITON_INTERPRET=1 and before any kernel is defined."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

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
    _patch_jit_introspection(interpreter)
    _patch_bool_ops(interpreter)
    _patch_small_gaps(interpreter)
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
    # what installed kernels call and neither tl.math nor the entries above had (FlagGems's isfinite and isclose
    # through `tl_extra_shim.finitef` / `isfinited`, its round, fmod and div ops; found by starting 80 more of its
    # ops on the CPU, RESULTS.md#device-reads), and their plain kin
    "finitef": "isfinite",
    "isfinited": "isfinite",
    "rint": "rint",
    "nearbyint": "rint",
    "fmod": "fmod",
    "div": "true_divide",  # div_rn: `_rn` names are looked up without the suffix
    "fast_dividef": "true_divide",
    "fast_sinf": "sin",
    "fast_cosf": "cos",
    "fast_tanf": "tan",
    "fast_tanhf": "tanh",
    "fast_log2f": "log2",
    "fast_log10f": "log10",
    "fast_exp10f": None,
    "log10": "log10",
    "cbrt": "cbrt",
    "acosh": "arccosh",
    "asinh": "arcsinh",
    "atanh": "arctanh",
    "copysign": "copysign",
    "nextafter": "nextafter",
    "cyl_bessel_i0": "i0",
    "erfc": None,
    "lgamma": None,
    "tgamma": None,
}


def _divide_toward_zero(x, y):
    """libdevice's `div_rz` (FlagGems's trunc_div truncates its quotient): float32 operands divided in float64 give
    the exact quotient's float32 neighbours apart (53 bits hold more than twice 24), so rounding that to float32
    and stepping back toward zero where it grew is the quotient rounded toward zero. Other dtypes: to nearest."""
    import numpy as np

    x, y = np.asarray(x), np.asarray(y)
    if x.dtype != np.float32 or y.dtype != np.float32:
        return np.true_divide(x, y)
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = x.astype(np.float64) / y.astype(np.float64)
        near = exact.astype(np.float32)
        grew = np.isfinite(exact) & (np.abs(near.astype(np.float64)) > np.abs(exact))
    return np.where(grew, np.nextafter(near, np.float32(0)), near)


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
    numpy_fns["exp10"] = numpy_fns["fast_exp10f"] = lambda x: np.power(10.0, x)
    numpy_fns["erf"] = np.vectorize(math.erf, otypes=[np.float64])
    numpy_fns["erfc"] = np.vectorize(math.erfc, otypes=[np.float64])
    numpy_fns["lgamma"] = np.vectorize(math.lgamma, otypes=[np.float64])
    numpy_fns["tgamma"] = np.vectorize(math.gamma, otypes=[np.float64])
    numpy_fns["div_rz"] = _divide_toward_zero
    # the generic module, and the CUDA one kernels also import directly (FlagGems's tl_extra_shim, Liger's ops on
    # older Triton): its functions are stubs of their own, which raised "_semantic argument must be provided"
    import triton.language.extra.cuda.libdevice as cuda_libdevice

    for module in (libdevice, cuda_libdevice):
        for name in dir(module):
            stub = getattr(module, name)
            if name.startswith("_") or not callable(stub) or getattr(stub, "__module__", "") != module.__name__:
                continue
            base = name.removesuffix("_rn")
            if hasattr(tl.math, base) and callable(getattr(tl.math, base)):
                setattr(module, name, via_math(base))
            elif base in numpy_fns:
                setattr(module, name, via_numpy(numpy_fns[base]))


def _patch_jit_introspection(interpreter) -> None:
    """Host code that introspects `@triton.jit` objects expects a JITFunction: FlagGems's LibEntry (every FlagGems
    kernel) walks `.fn` until `isinstance(fn, triton.runtime.JITFunction)`, reads `.params` and `.signature`, and
    launches again through the kernel that `run()` returned (`kernel[grid](*args)`). Under the interpreter `@jit`
    makes an InterpretedFunction, so the import failed ("'function' object has no attribute 'fn'"). Make it a
    JITFunction to such code, with the parameters JITFunction would have, and let `run()` return a handle whose
    launch interprets the kernel again."""
    import inspect
    import re
    import textwrap

    from triton.runtime.jit import JITFunction, KernelParam, get_full_name

    base = interpreter.InterpretedFunction
    if issubclass(base, JITFunction):
        return

    class InterpretedJIT(base, JITFunction):
        """An InterpretedFunction that host code sees as a JITFunction (`triton.jit` makes these from now on)."""

        __hash__ = object.__hash__  # JITCallable hashes its source, which an interpreted function never parsed

        @property
        def cache_key(self) -> str:
            """The function's own source and name (FlagGems keys its tuning cache by it): JITCallable's walks every
            function called, and refuses the interpreted ones Triton made before this patch."""
            import hashlib

            return hashlib.sha256(f"{self._fn_name}\n{self._src}".encode()).hexdigest()

        def __init__(self, fn, **kwargs) -> None:
            base.__init__(self, fn, **kwargs)
            self.signature = inspect.signature(fn)
            dns = kwargs.get("do_not_specialize") or ()
            dns_oa = kwargs.get("do_not_specialize_on_alignment") or ()
            self.params = [
                KernelParam(i, p, i in dns or p.name in dns, i in dns_oa or p.name in dns_oa)
                for i, p in enumerate(self.signature.parameters.values())
            ]
            self.constexprs = [p.num for p in self.params if p.is_constexpr]
            self.module = fn.__module__
            # what JITCallable's readers expect; JITCallable.__init__ itself would set __name__, a read-only property
            self.hash, self.used_global_vals = None, {}
            self._fn_name = get_full_name(fn)
            try:
                self.raw_src, self.starting_line_number = inspect.getsourcelines(fn)
                src = textwrap.dedent("".join(self.raw_src))
                self._src = src[re.search(r"^def\s+\w+\s*\(", src, re.MULTILINE).start() :]
            except (OSError, TypeError, AttributeError):
                self.raw_src, self.starting_line_number, self._src = [], 0, ""
            self.__globals__ = fn.__globals__
            self.__qualname__ = fn.__qualname__

        def run(self, *args, grid, warmup, **kwargs):
            base.run(self, *args, grid=grid, warmup=warmup, **kwargs)
            return Launched(self)

    class Launched:
        """What `run()` returns: launching it (`kernel[grid](*args)`) runs the interpreted kernel again."""

        def __init__(self, fn) -> None:
            self.fn = fn

        def __getitem__(self, grid):
            return lambda *args, **kwargs: self.fn.run(*args, grid=grid, warmup=False, **kwargs)

    interpreter.InterpretedFunction = InterpretedJIT  # what triton.jit looks up when it decorates


def _patch_bool_ops(interpreter) -> None:
    """`a and b`, `a or b` and `not a` on tensors: Python's operators ask `bool(a)`, which the interpreter answers
    from the first element, so `mask = (offs < N) and (offs >= 0)` came out as `offs >= 0` alone (a masked tail
    then stores out of bounds; FlagGems's `celoss_indices_kernel` returned 6.5e33 for a loss of 5.36). Triton's
    compiler (code_generator.visit_BoolOp, visit_UnaryOp) makes them elementwise `logical_and` / `logical_or` /
    `__not__` of every tensor operand; non-tensor operands short-circuit as in Python (a falsy one ends an `and`, a
    truthy one an `or`) and otherwise drop out. Rewrite every BoolOp and `not` of a kernel's source into calls that
    do the same. The interpreter's own rewriter never visits an assignment's value, so this one does first."""
    import ast

    import triton.language as tl

    def bool_op(is_and: bool, *operands):
        nontrivial, value = [], None
        for operand in operands:  # thunks: evaluated in order, and only until a constant decides
            value = operand()
            if isinstance(value, tl.tensor):
                nontrivial.append(value)
            elif bool(value) is not is_and:
                return value
        if not nontrivial:
            return value
        while len(nontrivial) >= 2:
            rhs, lhs = nontrivial.pop(), nontrivial.pop()
            nontrivial.append(lhs.logical_and(rhs) if is_and else lhs.logical_or(rhs))
        return nontrivial[0]

    def not_op(value):
        return value.__not__() if isinstance(value, tl.tensor) else not value

    def loop(make_range, *bounds, **options):
        """`for i in range(...)` / `tl.range(...)`: the values of the Python range, each as the scalar tensor the
        compiler's induction variable is (code_generator.visit_For: the bounds' promoted integer type)."""
        import numpy as np

        wide = any(
            (isinstance(b, tl.tensor) and b.dtype.primitive_bitwidth == 64)
            or (isinstance(b, int) and not -(2**31) <= b < 2**31)
            for b in bounds
        )
        ty, np_type = (tl.int64, np.int64) if wide else (tl.int32, np.int32)
        for value in make_range(*bounds, **options):
            yield tl.tensor(interpreter.TensorHandle(np.array([value], dtype=np_type), ty), ty)

    # the rewritten kernel's globals get the interpreter module's names (FunctionRewriter._compile_and_exec)
    interpreter._klineage_bool_op = bool_op
    interpreter._klineage_not = not_op
    interpreter._klineage_loop = loop
    base = type(interpreter.FunctionRewriter.ast_transformer)

    class BoolOpRewriter(base):
        def visit_Assign(self, node):
            node.value = self.visit(node.value)
            return super().visit_Assign(node)

        def visit_BoolOp(self, node):
            self.generic_visit(node)
            thunks = [ast.Lambda(args=_no_args(), body=value) for value in node.values]
            return ast.copy_location(
                ast.Call(
                    func=ast.Name(id="_klineage_bool_op", ctx=ast.Load()),
                    args=[ast.Constant(value=isinstance(node.op, ast.And)), *thunks],
                    keywords=[],
                ),
                node,
            )

        def visit_For(self, node):
            self.generic_visit(node)
            call = node.iter
            if (
                isinstance(call, ast.Call)
                and _is_range(call.func)
                and not any(isinstance(a, ast.Starred) for a in call.args)
            ):
                loop_call = ast.Call(
                    func=ast.Name(id="_klineage_loop", ctx=ast.Load()),
                    args=[call.func, *call.args],
                    keywords=call.keywords,
                )
                node.iter = ast.copy_location(loop_call, call)
            return node

        def visit_UnaryOp(self, node):
            self.generic_visit(node)
            if not isinstance(node.op, ast.Not):
                return node
            call = ast.Call(func=ast.Name(id="_klineage_not", ctx=ast.Load()), args=[node.operand], keywords=[])
            return ast.copy_location(call, node)

    def _is_range(func) -> bool:  # `range(...)` or `tl.range(...)`; never `tl.static_range`, whose values are ints
        return (isinstance(func, ast.Name) and func.id == "range") or (
            isinstance(func, ast.Attribute) and func.attr == "range"
        )

    def _no_args():
        return ast.arguments(
            posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]
        )

    interpreter.FunctionRewriter.ast_transformer = BoolOpRewriter()


def _patch_small_gaps(interpreter) -> None:
    """Bool arguments become `int1` tensors holding int32 data (mangle_type says i1, the array is int32), on which
    numpy's logical ops raise; make them real bool arrays. `tl.dtype.value` (FlagGems's utils/limits.py reads
    `dtype.value` as the compiler's constexpr unwrapping allows) does not exist on a plain dtype: the dtype
    itself."""
    import numpy as np
    import triton.language as tl

    cvt = interpreter._implicit_cvt

    def implicit_cvt(arg):
        if isinstance(arg, bool):
            return tl.tensor(interpreter.TensorHandle(np.array([arg], dtype=np.bool_), tl.int1), tl.int1)
        return cvt(arg)

    interpreter._implicit_cvt = implicit_cvt
    if not hasattr(tl.dtype, "value"):
        tl.dtype.value = property(lambda self: self)
    _patch_bool_splat(interpreter)
    _patch_host_pointer_args(interpreter)
    _patch_lang_lookup(interpreter)
    _patch_reduce_scan_loops(interpreter)
    _patch_dead_overflow_checks(interpreter)
    _patch_fp8_casts(interpreter)
    _patch_list_grid(interpreter)
    _patch_frontend_overhead(interpreter)


def _patch_dead_overflow_checks(interpreter) -> None:
    """Every int32 `+`, `-` and `*` in a kernel is checked for overflow when `sanitize_overflow` is on: both
    operands cast to int64, the operation again, two comparisons and an `and`, then `device_assert`, which does
    nothing unless `debug` is on (semantic.device_assert; the interpreter's options never turn it on). The compiler
    drops that dead code; the interpreter computed it on numpy for every operation: 34 of the 61 s (profiled) of
    FlagGems's radix sort on a 16 x 64 input. With `debug` off the check is off, as it is in effect compiled."""
    import dataclasses

    options = interpreter.InterpreterOptions
    if not options().sanitize_overflow:
        return

    @dataclasses.dataclass(frozen=True)
    class Options(options):
        sanitize_overflow: bool = False

        def __post_init__(self):
            if self.debug:  # a debug run asks for the checks: keep them
                object.__setattr__(self, "sanitize_overflow", True)

    interpreter.InterpreterOptions = Options
    builder = interpreter.interpreter_builder
    builder.options = Options(**dataclasses.asdict(builder.options) | {"sanitize_overflow": False})


def _patch_bool_splat(interpreter) -> None:
    """A comparison's handle holds bool data under its operands' dtype (the interpreter's binary_op), and splat
    builds its array in the handle's dtype: `tl.broadcast_to(prev != prev, (B,))` of a scalar came out as float32
    zeros and ones, and `~` of it raised in numpy's bitwise_xor (FlagGems's cummax and cummin, whose loop kernel
    carries a scalar maximum: RESULTS.md#wild). A splat of bool data stays bool."""
    import numpy as np

    original = interpreter.InterpreterBuilder.create_splat

    def create_splat(self, ret_ty, arg):
        if getattr(arg.data, "dtype", None) == np.bool_:
            value = arg.data[0] if arg.data.ndim else arg.data
            return interpreter.TensorHandle(np.full(ret_ty.shape, value, dtype=np.bool_), arg.dtype.scalar)
        return original(self, ret_ty, arg)

    interpreter.InterpreterBuilder.create_splat = create_splat


def _patch_host_pointer_args(interpreter) -> None:
    """A launch argument that is a pointer but not a tensor (FlagGems's StridedBuffer: a tensor's storage seen with
    other strides and an offset, what its flip, glu and masked_fill pass) made the interpreter's host copy raise:
    it asks every pointer argument for `new_empty` (AttributeError: 'StridedBuffer' object has no attribute
    'new_empty'; RESULTS.md#wild). On the CPU the argument's memory is host memory already, its `data_ptr()` the
    address the kernel must see: it goes through as it is (a torch tensor, or Triton's own TensorWrapper, still
    takes the interpreter's path)."""
    import torch
    from triton.runtime.jit import TensorWrapper

    original = interpreter.GridExecutor._init_args_hst

    def host_resident(arg) -> bool:
        if isinstance(arg, torch.Tensor | TensorWrapper) or not hasattr(arg, "data_ptr"):
            return False
        # the storage says where the memory is: the `device` such a wrapper copied from its tensor is what the
        # program read, CUDA where CUDA is mapped to the CPU (cuda_on_cpu)
        storage = getattr(arg, "untyped_storage", None)
        device = storage().device if callable(storage) else getattr(arg, "device", None)
        return device is not None and torch.device(device).type == "cpu"

    class _Kept:  # a stand-in without data_ptr: the interpreter passes it through, and it is swapped back after
        def __init__(self, arg):
            self.arg = arg

    def init_args_hst(self, args_dev, kwargs):
        args = [_Kept(a) if host_resident(a) else a for a in args_dev]
        named = {k: _Kept(v) if host_resident(v) else v for k, v in kwargs.items()}
        args_hst, kwargs_hst = original(self, args, named)
        back = [a.arg if isinstance(a, _Kept) else a for a in args_hst]
        return back, {k: v.arg if isinstance(v, _Kept) else v for k, v in kwargs_hst.items()}

    interpreter.GridExecutor._init_args_hst = init_args_hst


def _patch_lang_lookup(interpreter) -> None:
    """The interpreter patches `triton.language` as the kernel's module names it, and asserts that it names it:
    a kernel whose module imports only `triton` (FlagGems's flip: `@triton.jit def copy_func(x): return x`) failed
    "triton.language must be visible from within jit'd function", where the compiler needs no such name
    (RESULTS.md#wild). Such a kernel gets `triton.language` patched as any other."""
    import inspect
    from types import SimpleNamespace

    import triton.language as tl

    original = interpreter._patch_lang

    def patch_lang(fn):
        if any(inspect.ismodule(v) and v in (tl, tl.core) for v in fn.__globals__.values()):
            return original(fn)
        return original(SimpleNamespace(__globals__={"tl": tl}))

    interpreter._patch_lang = _once_per_grid(interpreter, patch_lang)


class _Kept:
    """The scope of a patch not made again: nothing of its own to restore."""

    def restore(self) -> None:
        pass


def _once_per_grid(interpreter, patch_lang):
    """The interpreter patches `triton.language` again on every call of a device function, `tl.sum` and `tl.cumsum`
    among them (`@jit` functions of `triton.language.standard`, which names `tl.core`): a walk over every member of
    the module, its tensor class and `tl.math`, 3 ms a call, never restored. Inside one grid, a module once patched
    stays patched with the same builder until the grid ends: a device call whose modules are all patched already
    keeps them as they are. An exclusive cumsum over 256 rows of a real KernelBench level-1 file (three device calls
    a program) went from 1.76 to 0.95 s here, its whole CPU check from 61 to 40 s (RESULTS.md#kernelbench-cpu)."""
    import operator

    import triton.language as tl

    # per grid now running: its kernel, and the modules patched since the grid's own patch (empty before it: a
    # module set is never empty, so an empty one means the grid has not patched yet)
    running: list[tuple] = []

    def langs(fn) -> frozenset:
        # which of the two modules the globals hold, by identity (a module equals only itself) and in C: a walk in
        # Python over every global (`inspect.ismodule(v) and v in (tl, tl.core)`) on every device call was 6% of
        # FlagGems's radix sort (profiled, 32 x 128 input)
        values = fn.__globals__.values()
        found = frozenset(m for m in (tl, tl.core) if any(map(operator.is_, values, itertools.repeat(m))))
        return found or frozenset((tl,))  # a module naming neither gets `tl` (_patch_lang_lookup)

    def patch(fn):
        wanted = langs(fn)
        if running and running[-1][1] and wanted <= running[-1][1]:
            return _Kept()
        scope = patch_lang(fn)
        if running and (running[-1][1] or running[-1][0] is fn):
            # the grid's own patch (always made: its scope restores the modules when the grid ends), then devices'
            running[-1] = (running[-1][0], running[-1][1] | wanted)
        return scope

    grid_call = interpreter.GridExecutor.__call__

    def call(self, *args, **kwargs):
        running.append((self.fn, frozenset()))
        try:
            return grid_call(self, *args, **kwargs)
        finally:
            running.pop()

    interpreter.GridExecutor.__call__ = call
    return patch


# what a combine may call only on one element: its answer depends on the shape it is given
SHAPE_AWARE = frozenset(
    "sum max min reduce associative_scan cumsum cumprod argmax argmin xor_sum reshape view broadcast broadcast_to "
    "expand_dims arange full zeros zeros_like ones_like full_like permute trans join split sort flip histogram dot "
    "dot_scaled gather cat interleave".split()
)


def _patch_reduce_scan_loops(interpreter) -> None:
    """`ReduceOps.generic_reduce` and `ScanOps.generic_scan` (a combine function other than the built-in sum, max,
    min, argmax, argmin, cumsum, cumprod) call the combine on one element at a time: n calls of Python, each
    building Triton tensors, for a block of n elements (FlagGems's var, std, prod_dim, cummax, cummin timed out
    their 300 s gate on a 128x128 case: RESULTS.md#wild). Here whole slices are combined at once, in about
    log2(len(axis)) calls, as a GPU combines them in a tree: a reduction pairs neighbours (x0 with x1, x2 with x3,
    ...), a scan is Hillis and Steele's (element i takes i - d's partial, d doubling).
    Both keep every left operand to the left of its right one, so any associative combine, which Triton asks of
    one, gives what a fold gives (up to rounding, which the compiler's tree changes too). A combine must not tell a
    slice from an element: one that loops, or calls what looks at a shape (a reduction, a reshape, a broadcast),
    keeps the element-wise original; one that branches on its values (asks a tensor of several elements for its
    truth, which the interpreter answers True) gives up the slices at that moment and runs the original instead.
    A branch on the dtype (FlagGems's `if is_floating(a)` in cummax's combine) is no such branch."""
    import ast
    import functools
    import inspect
    import textwrap

    import numpy as np
    import triton.language as tl

    @functools.lru_cache(maxsize=256)
    def elementwise(fn) -> bool:
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        except (OSError, TypeError, SyntaxError):
            return False
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.FunctionDef) else []
        refused = (ast.While, ast.For, ast.AsyncFor, ast.Try, ast.Match)  # loops, and flow a slice would change
        for node in (n for stmt in body for n in ast.walk(stmt)):
            called = node.func if isinstance(node, ast.Call) else None
            name = getattr(called, "attr", getattr(called, "id", ""))
            if isinstance(node, refused) or name in SHAPE_AWARE:
                return False
        return bool(body)

    class Branched(Exception):
        """The combine asked a slice for its truth: it branches on values, so only elements may go through it."""

    def truth(tensor) -> bool:
        if tensor.handle.data.size > 1:
            raise Branched
        return bool(tensor.handle.data)

    def in_slices(self, shape: tuple, axis: int) -> bool:
        """Whether this reduction or scan may go through in slices: a block (whose length along the axis is a power
        of two, as every block of Triton's is; halving keeps the shapes Triton's too) and a combine that is
        elementwise as far as its source tells."""
        n = shape[axis % len(shape)] if shape else 0
        return n > 0 and n & (n - 1) == 0 and elementwise(self.combine_fn.fn)

    def combine(self, dtypes, left, right):
        """The combine over two lists of equal-shape arrays (axis first), as arrays in the inputs' dtypes."""
        a = [self.to_tensor(x, t) for x, t in zip(left, dtypes, strict=True)]
        b = [self.to_tensor(x, t) for x, t in zip(right, dtypes, strict=True)]
        # as the interpreter calls a device function: through its rewrite, whose `and`/`or`/`not` are elementwise
        # (_patch_bool_ops); the interpreter's own element-wise loop calls the bare function
        fn = self.combine_fn.rewrite() if hasattr(self.combine_fn, "rewrite") else self.combine_fn.fn
        interpreted = tl.core.tensor.__dict__.get("__bool__")  # the interpreter's, set for the kernel's run
        tl.core.tensor.__bool__ = truth
        try:
            result = fn(*a, *b)
        finally:
            if interpreted is None:
                del tl.core.tensor.__bool__
            else:
                tl.core.tensor.__bool__ = interpreted
        result = result if isinstance(result, tuple) else (result,)
        out = []
        for r, x in zip(result, left, strict=True):
            o = np.empty_like(x)
            o[...] = r.handle.data.reshape(x.shape) if isinstance(r, tl.core.tensor) else r  # the original's cast
            out.append(o)
        return out

    original_reduce = interpreter.ReduceOps.generic_reduce
    original_scan = interpreter.ScanOps.generic_scan

    def generic_reduce(self, input):
        original_axis = self.axis
        flat, axis = self.unravel(input, self.axis)
        shape = flat[0].handle.data.shape
        if not in_slices(self, shape, axis):
            return original_reduce(self, input)
        axis %= len(shape)
        dtypes = [arg.dtype for arg in flat]
        xs = [np.moveaxis(arg.handle.data, axis, 0) for arg in flat]
        try:
            while xs[0].shape[0] > 1:
                xs = combine(self, dtypes, [x[0::2] for x in xs], [x[1::2] for x in xs])
        except Branched:
            return original_reduce(self, input)
        out = []
        for x, t in zip(xs, dtypes, strict=True):
            a = x[0]
            if self.keep_dims:
                a = np.expand_dims(a, axis) if original_axis is not None else a.reshape((1,) * len(shape))
            elif original_axis is None:
                a = a.item()
            out.append(self.to_tensor(a, t))
        return out

    def generic_scan(self, input):
        shape = input[0].handle.data.shape
        if not in_slices(self, shape, self.axis):
            return original_scan(self, input)
        axis = self.axis % len(shape)
        dtypes = [arg.dtype for arg in input]
        xs = [np.moveaxis(arg.handle.data, axis, 0).copy() for arg in input]
        n, d = shape[axis], 1
        try:
            while d < n:
                # every block shape stays the full one (Triton's blocks are powers of two): element i combines
                # i - d's partial with its own; the first d combine themselves with themselves and are thrown away
                shifted = [np.concatenate([x[:d], x[: n - d]]) for x in xs]
                combined = combine(self, dtypes, shifted, xs)
                xs = [np.concatenate([x[:d], c[d:]]) for x, c in zip(xs, combined, strict=True)]
                d *= 2
        except Branched:
            return original_scan(self, input)
        return [self.to_tensor(np.moveaxis(x, 0, axis), t) for x, t in zip(xs, dtypes, strict=True)]

    interpreter.ReduceOps.generic_reduce = generic_reduce
    interpreter.ScanOps.generic_scan = generic_scan


# fp8 formats of the interpreter by Triton's name: exponent bias, mantissa bits, largest finite magnitude, and how
# they spend their special codes: "fn" (e4m3fn: S.1111.111 is NaN, no inf), "ieee" (e5m2: exponent all ones is inf
# or NaN), "fnuz" (AMD's: 0x80 is the only NaN, no inf, no -0), "b15" (Triton's own e4m3 with bias 15: all finite)
FP8_FORMATS = {
    "fp8e4nv": (7, 3, 448.0, "fn"),
    "fp8e5": (15, 2, 57344.0, "ieee"),
    "fp8e4b8": (8, 3, 240.0, "fnuz"),
    "fp8e5b16": (16, 2, 57344.0, "fnuz"),
    "fp8e4b15": (15, 3, 1.875, "b15"),
}


def fp8_values(name: str) -> np.ndarray:
    """The value of each of the 256 codes of an fp8 format (float64, indexed by code)."""
    import numpy as np

    bias, m, _, kind = FP8_FORMATS[name]
    codes = np.arange(256)
    field, n = (codes >> m) & ((1 << (7 - m)) - 1), codes & ((1 << m) - 1)
    # subnormal (field 0): n * 2^(1 - bias - m); normal: (2^m + n) * 2^(field - bias - m)
    magnitude = np.where(field == 0, n, n + (1 << m)) * np.exp2(np.maximum(field, 1) - bias - m)
    values = np.where(codes >> 7, -magnitude, magnitude)
    if kind == "fn":
        values[(codes & 0x7F) == 0x7F] = np.nan
    elif kind == "ieee":
        top = field == (1 << (7 - m)) - 1
        values[top] = np.where(n[top] == 0, np.copysign(np.inf, values[top]), np.nan)
    elif kind == "fnuz":
        values[0x80] = np.nan
    return values


def to_fp8_bits(values: np.ndarray, name: str, toward_zero: bool = False) -> np.ndarray:
    """float64 values -> codes (uint8) of an fp8 format, as the compiled cast makes them on the GPU.

    e4m3fn and e5m2 (NVIDIA's `cvt.rn.satfinite`, what Triton emits for sm_89+; cuda_fp8.hpp's __NV_SATFINITE) and
    the fnuz pair (AMD's downcastToFp8_RTNE, the OCP saturation mode): round to nearest even, a magnitude past the
    largest finite and an inf become the largest finite, NaN stays NaN. `toward_zero` (`fp_downcast_rounding="rtz"`)
    truncates instead and keeps an inf an inf where the format has one (fp32 -> fp16 rtz -> e5m2's top byte).
    torch's `.to(float8_e4m3fn)` is the same; its e5m2 and fnuz casts do not saturate (inf, NaN).
    e4b15 (Triton's convert_float16_to_fp8e4b15): the magnitude clamped to 1.75 (NaN too: `min.f16x2` keeps the
    number), then rounded half away from zero (`+ 0x0080` before the byte is taken)."""
    import numpy as np

    bias, m, largest, kind = FP8_FORMATS[name]
    values = np.asarray(values, dtype=np.float64)
    nan, negative = np.isnan(values), np.signbit(values)
    magnitude = np.abs(values)
    if kind == "b15":
        magnitude = np.where(nan, 1.75, np.minimum(magnitude, 1.75))
    finite = np.where(np.isfinite(magnitude), magnitude, 0.0)
    smallest_normal = 1 - bias

    def binade(x):
        return _binade(x, smallest_normal)

    # the step of the grid around each value: its binade's, or the subnormals' below the smallest normal
    step = np.exp2(binade(finite) - m)
    units = finite / step  # exact: a power of two
    if kind == "b15":
        units = np.floor(units + 0.5)
    else:
        units = np.trunc(units) if toward_zero else np.rint(units)  # rint: ties to even
    with np.errstate(over="ignore"):
        rounded = np.minimum(units * step, largest)  # a carry into the next binade is simply the next value
    rounded = np.where(np.isinf(magnitude), largest, rounded)
    # code = (binade - smallest normal's) << m, plus the value in units of its binade's step (2^m + mantissa for a
    # normal, the mantissa for a subnormal)
    exponent = binade(rounded)
    codes = ((exponent - smallest_normal) << m) + (rounded / np.exp2(exponent - m)).astype(np.int64)
    if kind == "ieee" and toward_zero:
        codes = np.where(np.isinf(magnitude), 0x7C, codes)
    if kind == "fnuz":
        codes = np.where(nan, 0x80, np.where(negative & (codes != 0), codes | 0x80, codes))  # no -0: 0x80 is NaN
    else:
        codes = np.where(negative, codes | 0x80, codes)
        if kind != "b15":
            codes = np.where(nan, codes | 0x7F, codes)
    return codes.astype(np.uint8)


# the standard float formats a cast may round to, by Triton's name: exponent bias, mantissa bits (IEEE's layout:
# the exponent field all ones is inf or NaN, the largest finite is (2 - 2^-m) * 2^bias)
FLOAT_FORMATS = {"fp16": (15, 10), "bf16": (127, 7), "fp32": (127, 23)}


def to_float_bits(values: np.ndarray, name: str, toward_zero: bool = False) -> np.ndarray:
    """float64 values -> bit patterns (uint16 or uint32) of fp16, bf16 or fp32, as the compiled cast makes them:
    PTX cvt.rn (round to nearest even once, from the exact value, subnormals included; a magnitude past the largest
    finite rounds to inf, as cvt.rn has no satfinite), or cvt.rz for `toward_zero` (truncated; an overflow is the
    largest finite, as IEEE's round toward zero makes it, and an inf stays inf). NaN stays NaN (bf16's is 0x7FC0,
    as _to_bf16_bits and torch's scalar cast make it); -0 stays -0. torch's casts from fp32 are the same, NaN's
    payload aside."""
    import numpy as np

    bias, m = FLOAT_FORMATS[name]
    largest = (2 - 2.0**-m) * 2.0**bias
    values = np.asarray(values, dtype=np.float64)
    magnitude = np.abs(values)
    finite = np.isfinite(magnitude)
    # as to_fp8_bits: the value in units of the grid step around it, rounded; exact, the step being a power of two
    step = np.exp2(_binade(np.where(finite, magnitude, 0.0), 1 - bias) - m)
    units = np.where(finite, magnitude, 0.0) / step
    rounded = (np.trunc(units) if toward_zero else np.rint(units)) * step  # rint: ties to even
    rounded = np.where(rounded > largest, largest if toward_zero else np.inf, rounded)
    exact = np.copysign(np.where(finite, rounded, magnitude), values)  # inf and NaN as they were
    if name == "bf16":
        return _to_bf16_bits(exact.astype(np.float32))  # exact in fp32: only NaN is changed (to 0x7FC0)
    width = 16 if name == "fp16" else 32
    return exact.astype(getattr(np, f"float{width}")).view(getattr(np, f"uint{width}"))


def _binade(x: np.ndarray, smallest_normal: int) -> np.ndarray:
    """The exponent of each x's binade, or the smallest normal's below it (zero included)."""
    import numpy as np

    return np.where(x > 0, np.maximum(np.frexp(x)[1] - 1, smallest_normal), smallest_normal)


def _patch_fp8_casts(interpreter) -> None:
    """`_convert_float` (every cast to or from an fp8 type goes through it: create_fp_to_fp, and tl.dot's fp8
    operands) is bit surgery that rounds wrongly. Its RTNE branch adds the cut-off bit to the truncated mantissa
    (Triton 3.6.0 interpreter.py:241), and the sum, 2^m when it carries, is ORed into the exponent field (:261-262):
    the carry survives only when the exponent's low bit is 0, so 124.3 gave 64 instead of 128 (float8e4nv and
    float8e5 alike). Ties also round away from zero; the subnormal range truncates (0.001 -> float8e4nv gave 0, not
    2^-9); an overflow clamps the exponent field to all ones (:232: NaN in e4m3fn, inf in e5m2, where the GPU
    saturates); widening reads fp8 inf and NaN codes as numbers. torchao's fp8 blockwise quantizers
    (fp8_blockwise_act_quant: 19 of 1024 values 2x off) and its other fp8-producing kernels came out unlike the
    same kernels on a GPU.
    The conversions between standard float types that reach it (gap 14) fared no better: fp32 -> bf16 from
    cast_impl, with no rounding mode, truncated where cvt.rn.bf16.f32 rounds to nearest even; the `rtz` ones
    (create_fp_to_fp) made NaN of an fp16 overflow and inf of a NaN whose payload lies in the cut-off bits; its
    renormalization of subnormals garbled bf16's (1e-40 -> bf16 gave 0xb, not 0x1) and raised on an fp64 zero.
    Every conversion goes through exact values here: the source decoded to float64 (which holds every fp32, fp16,
    bf16 and fp8 value), rounded once to the target as the compiled cast rounds (to_fp8_bits, to_float_bits; no
    rounding mode is cast_impl's default, to nearest even), which leaves a widening exact."""
    import numpy as np
    import triton.language as tl

    toward_zero = interpreter._ir.ROUNDING_MODE.RTZ

    def as_float64(data, dtype):
        if dtype.name in FP8_FORMATS:
            return fp8_values(dtype.name)[np.asarray(data).view(np.uint8)]
        if dtype == tl.bfloat16:
            return (np.asarray(data).view(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        with np.errstate(invalid="ignore"):  # a signalling NaN stays a NaN, quietly
            return np.asarray(data).astype(np.float64)

    def convert_float(input, input_dtype, output_dtype, rounding_mode):
        source, target, rtz = input_dtype.name, output_dtype.name, rounding_mode == toward_zero
        # the common casts by a shorter route (a bf16 load widened, an fp32 result stored as bf16 or fp16: a fifth
        # of to_float_bits's time or less on a large block); the unit tests hold the rounding ones to to_float_bits
        if (target in ("fp32", "fp64") and source != "fp64") or (source in FP8_FORMATS and target not in FP8_FORMATS):
            values = as_float64(input, input_dtype)  # every value exact in the target
            out = _to_bf16_bits(values.astype(np.float32)) if target == "bf16" else values.astype(f"float{target[2:]}")
        elif source == "fp32" and target == "bf16" and not rtz:
            out = _to_bf16_bits(np.asarray(input).view(np.float32))
        elif source in ("fp32", "fp64") and target == "fp16" and not rtz:
            with np.errstate(over="ignore"):  # numpy's cast rounds once to nearest even, an overflow to inf
                out = np.asarray(input).astype(np.float16)
        elif target in FP8_FORMATS:
            out = to_fp8_bits(as_float64(input, input_dtype), target, rtz)
        else:
            out = to_float_bits(as_float64(input, input_dtype), target, rtz)
        out = out.view(f"uint{output_dtype.primitive_bitwidth}")  # as the original: bits, in an unsigned type
        return out.reshape(np.shape(input))

    interpreter._convert_float = convert_float
    _patch_cast_impl(interpreter, convert_float)


def _patch_cast_impl(interpreter, convert_float) -> None:
    """cast_impl (fp_trunc, fp_ext, int <-> fp) takes fp32 <-> bf16 to `_convert_float` and makes every other cast
    an `astype` of the data, which for bf16 (stored as uint16) is the value as an integer, not bf16's bits: fp64 ->
    bf16 and an integer -> bf16 (`tl.arange(0, B).to(tl.bfloat16)`) came out as garbage (gap 14). semantic.cast
    widens a bf16 source to fp32 before any other cast, so only fp32 reads bf16 here. A float -> float cast goes to
    the patched `_convert_float` (to nearest even, as cvt.rn); an integer -> bf16 rounds its value once, as
    cvt.rn.bf16 of an integer does (exact in float64 up to 2^53: an int64 past it may round twice)."""
    import numpy as np
    import triton.language as tl

    original = interpreter.InterpreterBuilder.cast_impl

    def cast_impl(self, src, dst_type):
        src_type, dst_scalar = src.dtype.scalar, dst_type.scalar
        if src_type.is_floating() and dst_scalar.is_floating():
            data = convert_float(src.data, src_type, dst_scalar, None)
        elif dst_scalar == tl.bfloat16 and src_type != tl.bfloat16:
            data = to_float_bits(np.asarray(src.data).astype(np.float64), "bf16").reshape(np.shape(src.data))
        else:
            return original(self, src, dst_type)
        return interpreter.TensorHandle(data.view(interpreter._get_np_dtype(dst_type)), dst_scalar)

    interpreter.InterpreterBuilder.cast_impl = cast_impl


def _patch_list_grid(interpreter) -> None:
    """`GridExecutor.__call__` pads the grid with `grid + (1,) * (3 - len(grid))`, which only a tuple survives:
    torch.sparse._triton_ops.launch_kernel (torchao's bsr_dense_addmm) launches `kernel[list(grid)]` and failed
    "can only concatenate list (not "tuple") to list". The compiled launcher (JITFunction.run) reads `grid[0]`,
    `grid[1]`, `grid[2]` of any sequence of 1 to 3 entries, a callable's result too: such a grid is a tuple here."""
    original = interpreter.GridExecutor.__init__

    def as_tuple(grid):
        return grid if isinstance(grid, tuple) else tuple(grid)

    def init(self, fn, arg_names, grid, *args, **kwargs):
        if callable(grid):
            wrapped = grid
            grid = lambda meta: as_tuple(wrapped(meta))  # noqa: E731
        else:
            grid = as_tuple(grid)
        original(self, fn, arg_names, grid, *args, **kwargs)

    interpreter.GridExecutor.__init__ = init


def _patch_frontend_overhead(interpreter) -> None:
    """The interpreter runs every op of every program through Triton's frontend (triton.language.core and
    semantic), whose type objects are rebuilt from scratch on every op: each tensor makes a `tl.tuple` of its
    shape (a `tuple_type` whose name formats every dimension), each block type unwraps, validates and formats its
    shape again, and `_get_np_dtype` builds a dict of 19 dtypes per call. That, not numpy, was the time of
    FlagGems's radix sort (profiled on 32 x 128: core.py alone 47% of the run, numpy under 2%; 544 programs of ~70
    scalar and 2048-element ops each) and of its kron's autotuning. Each patch below computes the same objects with
    the same attributes from a cache of what depends only on a shape or a dtype, and leaves any case it does not
    recognize to the original. Measured on 2 cores here: the sort of 32 x 128 from 5.4-5.9 s to 3.0-3.2 s (best of
    3-5), the wild suite's gems_sort start from a 300 s timeout of its correctness gate to a 177 s pass (trials
    77, 49, 49 s), gems_cummax's trials from 3.6/2.1/2.1 s to 1.6/1.0/1.1 s; the outputs bit for bit the same.

    - `_get_np_dtype`: the original's answer for each scalar dtype (its dict is keyed by the dtype's name too).
    - `block_type.__init__`: for a shape of plain ints, the shape's `tuple_type`, numel and text as the original
      made them for that shape (computed by the original, which validates, on the first sight of a shape).
    - `tensor.__init__`: for a scalar or a block_type, the shape's `tuple_type` and numel as above.
    - `_unwrap_if_constexpr`: the same isinstance chain, decided once per exact type.
    - a kernel's `tl.tuple` values are never shared: each object still gets its own list, as before; only the
      `tuple_type` objects (which nothing in the interpreter mutates) are shared between equal shapes. Triton's
      code generator, which does write them, never runs in a process patched here: a gate's job is a child of its
      own, and only the interpreting ones call patch_interpreter (gates/common._interpreter; the compile and
      profile gates load with interpret=False)."""
    import math

    import triton.language as tl

    core = tl.core
    tl_tuple, constexpr, block_type, tensor = core.tuple, core.constexpr, core.block_type, core.tensor

    original_np_dtype = interpreter._get_np_dtype
    np_dtypes: dict = {}

    def get_np_dtype(tt_dtype):
        scalar = tt_dtype.element_ty if type(tt_dtype) is block_type else tt_dtype
        if type(scalar) is not core.dtype:  # pointers (uint64), and anything else as the original answers it
            return original_np_dtype(tt_dtype)
        found = np_dtypes.get(scalar.name)
        if found is None:
            found = np_dtypes[scalar.name] = original_np_dtype(scalar)
        return found

    get_np_dtype.__wrapped__ = original_np_dtype  # each patch keeps its original there (the tests compare them)
    interpreter._get_np_dtype = get_np_dtype

    original_block_init = block_type.__init__
    block_shapes: dict = {}  # shape ints -> (the shape tl.tuple's tuple_type, numel, the shape as text)

    def plain_ints(shape):
        values = shape.values if type(shape) is tl_tuple else shape
        out = []
        for s in values:
            if type(s) is constexpr:
                s = s.value
            if type(s) is not int:
                return None
            out.append(s)
        return out

    def block_init(self, element_ty, shape):
        ints = plain_ints(shape) if type(shape) in (list, tl_tuple) else None
        known = block_shapes.get(tuple(ints)) if ints else None
        if known is None:
            original_block_init(self, element_ty, shape)
            if ints:
                block_shapes[tuple(ints)] = (self.shape.type, self.numel, str(self.shape))
            return
        ty, numel, text = known
        self.element_ty = element_ty
        self.shape = tl_tuple(ints, ty)
        self.numel = numel
        self.name = f"<{text}, {element_ty}>"

    block_init.__wrapped__ = original_block_init
    block_type.__init__ = block_init

    original_tensor_init = tensor.__init__
    tensor_shapes: dict = {}  # shape ints -> (the tensor's shape tuple_type, numel)

    type_of = type

    def tensor_init(self, handle, type):  # the original's parameter names: callers may pass `type=`
        kind = type_of(type)
        if kind is block_type:
            ints = type.shape.values
        elif kind is core.dtype or kind is core.pointer_type:
            ints = []
        else:
            return original_tensor_init(self, handle, type)
        key = tuple(ints)
        known = tensor_shapes.get(key)
        if known is None:
            if any(type_of(s) is not int for s in ints):
                return original_tensor_init(self, handle, type)
            shape = tl_tuple([constexpr(s) for s in ints])
            known = tensor_shapes[key] = (shape.values, shape.type, constexpr(math.prod(ints)))
        dims, ty, numel = known
        self.handle = handle
        self.shape = tl_tuple(dims, ty)  # a list of its own; the attributes in the original's order
        self.numel = numel
        self.type = type
        self.dtype = type.scalar

    tensor_init.__wrapped__ = original_tensor_init
    tensor.__init__ = tensor_init

    original_unwrap = core._unwrap_if_constexpr
    unwrap_kinds: dict = {}  # exact type -> 0: as it is, 1: its value, 2: a sequence (the original recurses)

    def unwrap_if_constexpr(o):
        kind = unwrap_kinds.get(type(o))
        if kind is None:
            t = type(o)
            nested = issubclass(t, (list, tuple, tl_tuple))
            kind = 2 if nested else 1 if issubclass(t, constexpr) else 0
            if any("__class__" in vars(c) for c in t.__mro__[:-1]):  # isinstance may answer otherwise: no cache
                return original_unwrap(o)
            unwrap_kinds[t] = kind
        if kind == 0:
            return o
        if kind == 1:
            return o.value
        return original_unwrap(o)

    unwrap_if_constexpr.__wrapped__ = original_unwrap
    core._unwrap_if_constexpr = unwrap_if_constexpr  # core's functions and semantic's `tl.` read it from core

    original_tuple_eq = tl_tuple.__eq__

    def tuple_eq(self, other):
        # a shape against a list or a tl.tuple of plain ints (every broadcast compares them): the original normalizes
        # `other` (unwrapping it into a new tl.tuple, whose type it formats) only to compare the same ints
        kind = type(other)
        values = other if kind is list else other.values if kind is tl_tuple else None
        if values is None or any(type(v) is not int for v in values):
            return original_tuple_eq(self, other)
        return constexpr(self.values == values)

    tuple_eq.__wrapped__ = original_tuple_eq
    tl_tuple.__eq__ = tuple_eq
