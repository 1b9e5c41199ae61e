"""The interpreter fixes, each on the smallest kernel that showed the gap (run in a sandbox child, since
TRITON_INTERPRET must be set before Triton is imported)."""

import numpy as np
import pytest

from klineage.interp import _to_bf16_bits
from klineage.sandbox import Job

pytestmark = pytest.mark.interpreter


def test_bf16_rounding_is_round_to_nearest_even():
    import torch

    values = torch.randn(1000, dtype=torch.float32)
    ours = _to_bf16_bits(values.numpy())
    theirs = values.bfloat16().view(torch.int16).numpy().view(np.uint16)
    assert (ours == theirs).all()
    assert _to_bf16_bits(np.array([np.nan], dtype=np.float32))[0] == 0x7FC0


def test_bf16_arithmetic_scalars_libdevice_and_autotune(sandbox):
    result = sandbox.run(Job("tests.fixtures.interp_jobs:run_all", None, env={"TRITON_INTERPRET": "1"}))
    assert result.ok, result.error + result.log
    errors = result.value
    # two bf16 roundings (silu, then the product) may each land one ulp from PyTorch's, whose fp32 silu differs
    # in the last bits; unpatched, the raw-bit arithmetic was off by orders of magnitude (values near 1e36)
    assert errors["bf16_silu_mul"] <= 2**-6
    assert errors["float_scalar"] == 0.0
    assert errors["libdevice_rsqrt"] < 1e-6
    # more libdevice through the CUDA module (FlagGems's isfinite, isclose, round, fmod, trunc division): stubs that
    # raised "_semantic argument must be provided" before
    assert errors["libdevice_finite"] == 0.0
    assert errors["libdevice_rint"] == 0.0
    assert errors["libdevice_div_rn"] == 0.0
    assert errors["libdevice_div_rz_not_toward_zero"] == 0.0
    assert errors["libdevice_div_rz_differs"] >= 3  # the quotients that round up to nearest are one ulp lower
    assert errors["libdevice_fmod"] == 0.0
    assert errors["libdevice_fast_sinf"] < 1e-6
    assert errors["autotune_accumulates_without_reset"] > 0  # the H200 trap, reproduced on the CPU
    # range variables as tensors, tensor or/not, a bool argument, extra.cuda.libdevice: each failed or misread
    assert errors["compiler_reads"] < 1e-5
    assert errors["dtype_value"] == 0.0
    assert errors["bool_splat"] == 0.0  # a scalar comparison broadcast came out float32: `~` raised in numpy
    assert errors["pointer_object"] == 0.0  # a pointer that is no tensor: the host copy asked it for new_empty
    assert errors["pointer_object_mapped"] == 0.0  # its device read as CUDA: its storage says host memory
    assert errors["no_lang_module"] == 0.0  # a jit function whose module never imports triton.language
    # combines of the kernel's own, in a tree: the same values as PyTorch's, in about log2(len) calls of Python
    # (a block of 4x64 took 252 calls one element at a time; FlagGems's var timed out its gate so); FlagGems's
    # cummax combine (a branch on the dtype, `and`/`not` on tensors) goes through in slices too
    assert errors["reduce_welford"] < 1e-4
    assert errors["reduce_first_argmax"] == 0.0  # the left operand stays left: ties keep the first index
    assert errors["scan_cummax"] == 0.0
    assert errors["reduce_branching"] == 0.0  # a combine that branches on values still runs element by element
    # the grid's patch of tl (tl, tl.tensor, tl.math, tl's descriptors: 4 walks) and the first device call's of
    # the modules it names (up to 6 more), once: before, each of the 30 device calls (24 tl.sum, 6 tl.zeros)
    # walked them again, 3 ms a call: 181 walks
    assert errors["patches_per_grid"] <= 10
    assert errors["row_sums"] < 1e-5
    # the overflow checks whose assert does nothing without `debug` are off (over half of an index-heavy kernel's
    # interpreted time), on again for a debug run; int32 arithmetic still wraps
    assert errors["overflow_checks"] == (False, True)
    assert errors["int32_wraps"] == 0.0
    assert errors["restored_after_grid"] == 0.0  # the grid's own patch is still undone when it ends
    calls = errors["combine_calls"]
    assert calls == {"welford": 6, "argmax_left": 3, "max_right": 6, "branching": 16}  # log2 of 64, 8, 64; then
    # the branching one asked a slice for its truth once and ran on 15 pairs of elements
