"""The bits klineage.interp's casts between standard float types make (gap 14). To nearest even: against torch's
casts from fp32 (which round once, from the exact value, as the compiled cvt.rn does) on every fp16 value and random
fp32 bit patterns, and from fp64 against the nearest of all 2^16 values of the target (cvt.rn.bf16.f64 and
cvt.rn.f16.f64 round once; torch's double -> bf16 goes through fp32). `rtz` (cvt.rz) on the cases the interpreter
got wrong."""

import numpy as np
import pytest

from klineage.interp import FLOAT_FORMATS, _to_bf16_bits, to_float_bits

TORCH_NAMES = {"bf16": "bfloat16", "fp16": "float16"}


def _values(bits: np.ndarray, name: str) -> np.ndarray:
    if name == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return bits.view(np.float16 if name == "fp16" else np.float32).astype(np.float64)


@pytest.mark.parametrize("name", ["bf16", "fp16"])
def test_fp32_to_nearest_even_matches_torch(name):
    import torch

    every_fp16 = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
    bits = np.random.default_rng(0).integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32)
    x = np.concatenate([every_fp16, bits.view(np.float32)])
    with np.errstate(invalid="ignore"):  # signalling NaNs among the random bit patterns
        ours = to_float_bits(x.astype(np.float64), name)
    theirs = torch.from_numpy(x).to(getattr(torch, TORCH_NAMES[name])).view(torch.int16).numpy().view(np.uint16)
    nan = np.isnan(x)
    assert np.array_equal(ours[~nan], theirs[~nan])  # every pattern: -0, subnormals, ties, overflow to inf
    assert np.isnan(_values(ours[nan], name)).all()  # NaN stays NaN (torch's payload depends on its code path)
    # the interpreter's shortcuts for these casts (_patch_fp8_casts): gap 3's rounding, numpy's cast
    with np.errstate(over="ignore"):
        shortcut = _to_bf16_bits(x) if name == "bf16" else x.astype(np.float16).view(np.uint16)
    assert np.array_equal(shortcut[~nan], ours[~nan]) and np.isnan(_values(shortcut[nan], name)).all()


@pytest.mark.parametrize("name", ["bf16", "fp16"])
def test_fp64_to_nearest_even_rounds_once(name):
    bias, m = FLOAT_FORMATS[name]
    rng = np.random.default_rng(1)
    n = 200_000
    x = rng.standard_normal(n) * np.exp2(rng.integers(-bias - m - 2, bias + 2, n))  # subnormals to past the largest
    grid = _values(np.arange(0x7C00 if name == "fp16" else 0x7F80, dtype=np.uint16), name)  # every finite >= 0
    # the next code after the largest finite is inf's, and 2^(bias + 1) would be its value: even, so a tie there
    # rounds to it, which is IEEE's overflow threshold
    grid = np.append(grid, 2.0 ** (bias + 1))
    magnitude = np.abs(x)
    hi = np.minimum(np.searchsorted(grid, magnitude), grid.size - 1)
    lo = np.maximum(hi - 1, 0)
    below, above = magnitude - grid[lo], grid[hi] - magnitude  # exact: neighbours of x
    code = np.where((below < above) | ((below == above) & (lo % 2 == 0)), lo, hi)
    code = np.where(magnitude >= grid[-1], grid.size - 1, np.where(magnitude == grid[hi], hi, code))
    expected = np.copysign(np.where(code == grid.size - 1, np.inf, grid[code]), x)
    ours = _values(to_float_bits(x, name), name)
    assert np.array_equal(ours, expected)
    if name == "fp16":  # the interpreter's shortcut from fp64: numpy's cast, which rounds once too
        with np.errstate(over="ignore"):
            assert np.array_equal(x.astype(np.float16).astype(np.float64), expected)
    # through fp32 first, a tie made by the first rounding goes to even a second time: not what the GPU does
    with np.errstate(over="ignore"):
        twice = _values(to_float_bits(x.astype(np.float32).astype(np.float64), name), name)
    assert (twice != expected).any()


def test_rounding_toward_zero():
    """`fp_downcast_rounding="rtz"`: truncated; past the largest finite the largest finite (IEEE's round toward
    zero; the interpreter made NaN of it), an inf stays inf, a NaN stays NaN (the interpreter truncated a NaN whose
    payload lies in the cut-off bits to inf), a subnormal truncates (the interpreter garbled it)."""
    with np.errstate(invalid="ignore"):
        nan_low_payload = np.array([0x7F800001], dtype=np.uint32).view(np.float32).astype(np.float64)
    x = np.concatenate(
        [[1 + 2.0**-6 + 2.0**-12, -(1 + 2.0**-6 + 2.0**-12), 1e6, -1e40, np.inf, 1e-40, -0.0], nan_low_payload]
    )

    def cast(name, toward_zero):
        return _values(to_float_bits(x, name, toward_zero), name)

    largest_bf16 = (2 - 2.0**-7) * 2.0**127
    assert cast("bf16", True)[:6].tolist() == [1 + 2.0**-6, -(1 + 2.0**-6), 999424.0, -largest_bf16, np.inf, 2.0**-133]
    assert cast("fp16", True)[:6].tolist() == [1 + 2.0**-6, -(1 + 2.0**-6), 65504.0, -65504.0, np.inf, 0.0]
    # to nearest even: the overflow is inf (cvt.rn has no satfinite)
    assert cast("bf16", False)[:4].tolist() == [1 + 2.0**-6, -(1 + 2.0**-6), 999424.0, -np.inf]
    assert cast("fp16", False)[:4].tolist() == [1 + 2.0**-6, -(1 + 2.0**-6), np.inf, -np.inf]
    for name in ("bf16", "fp16"):
        for toward_zero in (True, False):
            got = cast(name, toward_zero)
            assert np.signbit(got[6]) and got[6] == 0 and np.isnan(got[7]), (name, toward_zero)
