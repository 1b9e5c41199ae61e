"""The fp8 codes klineage.interp's casts make (gap 12), against torch's on every fp16 value and random fp32 bit
patterns: torch rounds to nearest even as the compiled cast does; the compiled cast saturates where torch's
e5m2 and fnuz casts make inf or NaN, so the reference is torch's cast of the value clamped to the largest finite."""

import numpy as np
import pytest

from klineage.interp import FP8_FORMATS, fp8_values, to_fp8_bits

TORCH_NAMES = {
    "fp8e4nv": "float8_e4m3fn",
    "fp8e5": "float8_e5m2",
    "fp8e4b8": "float8_e4m3fnuz",
    "fp8e5b16": "float8_e5m2fnuz",
}


def _inputs() -> np.ndarray:
    every_fp16 = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
    bits = np.random.default_rng(0).integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([every_fp16, bits.view(np.float32)])


@pytest.mark.parametrize("name", TORCH_NAMES)
def test_codes_and_values_match_torch(name):
    import torch

    dtype = getattr(torch, TORCH_NAMES[name])
    every_code = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype)
    assert np.array_equal(fp8_values(name), every_code.double().numpy(), equal_nan=True)

    with np.errstate(invalid="ignore"):  # signalling NaNs among the random bit patterns
        x = _inputs()
        ours = to_fp8_bits(x.astype(np.float64), name)
    largest = FP8_FORMATS[name][2]
    theirs = torch.from_numpy(x).clamp(-largest, largest).to(dtype).view(torch.uint8).numpy()
    nan = np.isnan(x)
    assert np.array_equal(ours[~nan], theirs[~nan])  # every code, -0 and subnormals included
    assert np.isnan(fp8_values(name)[ours[nan]]).all()


def test_rounding_of_the_cases_the_interpreter_got_wrong():
    def cast(value: float, name: str, toward_zero: bool = False) -> float:
        return float(fp8_values(name)[to_fp8_bits(np.array([value]), name, toward_zero)[0]])

    assert cast(124.3, "fp8e4nv") == 128.0  # the carry into the exponent (the interpreter: 64)
    assert cast(124.3, "fp8e5") == 128.0
    assert cast(17.0, "fp8e4nv") == 16.0  # a tie, to even (the interpreter: away from zero, 18)
    assert cast(0.001, "fp8e4nv") == 2.0**-9  # rounded in the subnormal range (the interpreter: truncated to 0)
    assert cast(1e6, "fp8e5") == 57344.0  # saturated, as cvt.rn.satfinite (the interpreter: NaN's code)
    assert cast(-np.inf, "fp8e4nv") == -448.0
    assert to_fp8_bits(np.array([-1e-30]), "fp8e4b8")[0] == 0  # no -0 in fnuz: 0x80 is its NaN
    # fp_downcast_rounding="rtz" truncates, and keeps an inf an inf (e5m2 is fp16's top byte there)
    assert (cast(1.4, "fp8e5"), cast(1.4, "fp8e5", toward_zero=True)) == (1.5, 1.25)
    assert cast(np.inf, "fp8e5", toward_zero=True) == np.inf


def test_fp8e4b15_is_triton_s_own_conversion():
    """Triton's convert_float16_to_fp8e4b15: the magnitude clamped to 1.75 (NaN too), rounded half away from zero."""
    x = np.array([1.0625, 1.8, 5.0, np.nan, -np.inf, 0.3, 2.0**-18, 2.0**-19])
    got = fp8_values("fp8e4b15")[to_fp8_bits(x, "fp8e4b15")]
    assert got.tolist() == [1.125, 1.75, 1.75, 1.75, -1.75, 0.3125, 2.0**-17, 0.0]
    assert fp8_values("fp8e4b15")[0x7F] == 1.875  # every code is a number
