"""fp8 casts, list grids and casts between standard float types under the patched interpreter (klineage.interp, gaps
12, 13 and 14), each on a kernel of its own in a sandbox child, since TRITON_INTERPRET must be set before Triton is
imported."""

import math

import pytest

from klineage.interp import FP8_FORMATS
from klineage.sandbox import Job
from tests.fixtures.interp_cast_jobs import FLOAT_CASTS, FP8_SOURCES

pytestmark = pytest.mark.interpreter

INF, NAN = math.inf, math.nan
VALUES = [
    124.3, -124.3, 60.0, 0.3, -0.3, 1.0, 0.0, -0.0,  # 124.3: the carry into the exponent the interpreter lost
    15.9, 7.97, 0.2499, 31.9, 3.99, -15.9, 63.5, 0.0624,  # rounding up crosses a power of two
    17.0, 19.0, 1.0625, 1.1875, 1.125, 1.375, 20.0, 22.0, -17.0,  # ties, to even (e4m3: 17, 19, 1.0625, 1.1875)
    2.0**-9, 2.0**-10, 3 * 2.0**-10, 0.001, 2.0**-16, 2.0**-17, 1.5 * 2.0**-16, 2.0**-7 * 1.3, -(2.0**-9),  # subnormals
    2.0**-20, -1e-30, 1e-30,  # below every subnormal
    448.0, 449.0, 464.0, 470.0, 480.0, 1e4, 57344.0, 61440.0, 1e6, -1e6, 3e38, INF, -INF, NAN, -NAN,  # past the max
    240.0, 232.0, 248.0, -250.0, 1.75, 1.8, 1.86, 5.0,
]  # fmt: skip


def _torch_dtype(name: str):
    import torch

    return {"fp8e4nv": torch.float8_e4m3fn, "fp8e5": torch.float8_e5m2}[name]


@pytest.fixture(scope="module")
def round_trips(sandbox):
    result = sandbox.run(Job("tests.fixtures.interp_cast_jobs:fp8_round_trips", VALUES, env={"TRITON_INTERPRET": "1"}))
    assert result.ok, result.error + result.log
    return result.value


@pytest.mark.parametrize(
    "name,source", [(n, s) for n, sources in FP8_SOURCES.items() if n != "fp8e4b15" for s in sources]
)
def test_fp8_cast_matches_torch(round_trips, name, source):
    """Round to nearest even, as torch's cast; past the largest finite (inf too) the compiled cast saturates
    (PTX cvt.rn.satfinite), which torch does for e4m3fn only: the reference is torch's cast
    of the value clamped to the largest finite. NaN stays NaN."""
    import torch

    codes, back = round_trips[(name, source)]
    largest = FP8_FORMATS[name][2]
    x = torch.tensor(VALUES, dtype=torch.float32).to(getattr(torch, source))
    reference = x.clamp(-largest, largest).to(_torch_dtype(name))  # clamp keeps NaN
    expected_codes = reference.view(torch.uint8).tolist()
    expected_back = reference.float().tolist()
    for v, xs, c, e, b, eb in zip(VALUES, x.tolist(), codes, expected_codes, back, expected_back, strict=True):
        if math.isnan(xs):
            assert math.isnan(b), (v, c)
            continue
        assert (c, b) == (e, eb), f"{v} ({source} {xs}) -> {name}: code {c:#04x} = {b}, torch {e:#04x} = {eb}"
        assert math.copysign(1, b) == math.copysign(1, eb), v  # -0 stays -0


@pytest.mark.parametrize("source", FP8_SOURCES["fp8e4b15"])
def test_fp8e4b15_cast_is_the_compiled_one(round_trips, source):
    """No torch type holds e4b15 (bias 15, every code finite, 1.875 the largest); Triton's own conversion
    (convert_float16_to_fp8e4b15) clamps the magnitude to 1.75, NaN included, and rounds half away from zero."""
    expected = {
        1.0: 1.0, 1.0625: 1.125, 1.1875: 1.25, 0.3: 0.3125, -0.3: -0.3125, 1.75: 1.75, 1.8: 1.75, 1.86: 1.75,
        5.0: 1.75, INF: 1.75, -INF: -1.75, 2.0**-16: 2.0**-16, 2.0**-17: 2.0**-17, 2.0**-20: 0.0, 0.0624: 0.0625,
        0.2499: 0.25, -124.3: -1.75,
    }  # fmt: skip
    codes, back = round_trips[("fp8e4b15", source)]
    got = dict(zip(VALUES, back, strict=True))
    for v, want in expected.items():
        assert got[v] == want, (v, got[v], want)
    assert abs(back[VALUES.index(NAN)]) == 1.75
    # widening reads every code as a number: 0x7F is 1.875 (the encoder never makes it)
    assert codes[VALUES.index(1.8)] == 0x7E


def test_fp8_widening_matches_torch(sandbox):
    """Every code, NaN and inf ones included (read as numbers before: e5m2's inf as 65536, e4m3fn's NaN as 480),
    widened as torch widens it."""
    import torch

    result = sandbox.run(Job("tests.fixtures.interp_cast_jobs:fp8_widening", None, env={"TRITON_INTERPRET": "1"}))
    assert result.ok, result.error + result.log
    for (name, wide), back in result.value.items():
        codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(getattr(torch, name))
        expected = codes.to(getattr(torch, wide)).float()
        got = torch.tensor(back)
        same = (got == expected) | (got.isnan() & expected.isnan())
        assert same.all(), (name, wide, torch.nonzero(~same).flatten().tolist()[:8])
        assert (got.signbit() == expected.signbit())[~expected.isnan()].all(), (name, wide)


def test_list_grid_runs_as_the_tuple_grid(sandbox):
    result = sandbox.run(Job("tests.fixtures.interp_cast_jobs:list_grid", None, env={"TRITON_INTERPRET": "1"}))
    assert result.ok, result.error + result.log
    got = result.value
    expected = [(i * 100 + j) for i in range(3) for j in range(2) for _ in range(4)]
    assert got["tuple"] == expected
    assert got["list"] == got["tuple"]
    assert got["callable"] == got["tuple"]
    assert got["one"] == [i * 100 for i in range(6) for _ in range(4)]


# fp32 -> bf16 / fp16 edge values: ties both ways (1 + 2^-8 and 1 + 3 * 2^-8 in bf16, 1 + 2^-11 and 1 + 3 * 2^-11 in
# fp16), just past and short of a half unit, a carry into the next binade, the largest finites and just past them,
# subnormals of each target, -0, inf, NaN
FLOAT_VALUES = [
    1.0, 1 + 2.0**-8, 1 + 3 * 2.0**-8, 1 + 2.0**-8 + 2.0**-20, 1 + 2.0**-8 - 2.0**-20, -(1 + 3 * 2.0**-8),
    1 + 2.0**-11, 1 + 3 * 2.0**-11, -(1 + 2.0**-11 + 2.0**-20), 2 - 2.0**-9, 255.9, 0.1, -0.3, 3.14159265, 1e-3,
    65504.0, 65519.0, 65520.0, 70000.0, -1e5, 3.3895313892515355e38, 3.3961e38, 3.4028234663852886e38,
    6e-8, 2.9e-8, 3e-8, 1e-6, -6.1e-5, 1e-39, 9.2e-41, 1e-40, -1e-45, 0.0, -0.0,
    math.inf, -math.inf, math.nan, 123456.789, -7.0, 1000.0,
]  # fmt: skip


@pytest.fixture(scope="module")
def float_casts(sandbox):
    result = sandbox.run(
        Job("tests.fixtures.interp_cast_jobs:float_casts", FLOAT_VALUES, env={"TRITON_INTERPRET": "1"})
    )
    assert result.ok, result.error + result.log
    return result.value


def _toward_zero(x, nearest):
    """torch's cast to nearest, one unit toward zero where it rounded away from zero; a finite overflow is the
    largest finite (cvt.rz, IEEE's round toward zero)."""
    import torch

    past = (nearest.double().abs() > x.double().abs()) & x.isfinite()
    stepped = torch.where(past, torch.nextafter(nearest, torch.zeros_like(nearest)), nearest)
    largest = torch.finfo(nearest.dtype).max
    return torch.where(x.isfinite() & stepped.isinf(), stepped.sign() * largest, stepped).to(nearest.dtype)


@pytest.mark.parametrize("source,target", FLOAT_CASTS)
def test_float_cast_matches_torch(float_casts, source, target):
    """Round to nearest even, as torch's cast and the compiled cvt.rn; an overflow is inf (fp16 and bf16 alike); -0
    stays -0; bit for bit, NaN aside (NaN stays NaN). `rtz` truncates (cvt.rz). The interpreter truncated every cast
    to bf16 (fp16 -> bf16 too, by fp32), made garbage of fp64 and int32 -> bf16, and NaN of an rtz overflow."""
    import torch

    tt = getattr(torch, target)
    bits = getattr(torch, f"int{torch.finfo(tt).bits}")
    if source == "int32":
        x = torch.tensor([int(v) if abs(v) < 2**31 else 0 for v in FLOAT_VALUES], dtype=torch.int32)
    else:
        x = torch.tensor(FLOAT_VALUES, dtype=torch.float64).to(
            torch.float32 if source == "store" else getattr(torch, source)
        )
    # fp64 -> bf16 / fp16: torch goes through fp32; these values round the same either way (the unit test covers
    # double rounding)
    nearest = x.to(tt)
    for rounding in ("rtne", "rtz"):
        got = float_casts.get((source, target, rounding))
        if got is None:
            continue
        assert not isinstance(got, str), got
        expected = nearest if rounding == "rtne" else _toward_zero(x, nearest)
        for v, g, e in zip(FLOAT_VALUES, torch.tensor(got, dtype=bits).view(tt), expected, strict=True):
            if e.isnan():
                assert g.isnan(), (v, rounding)
                continue
            g_bits, e_bits = g.view(bits).item(), e.view(bits).item()
            where = f"{v} {source} -> {target} {rounding}"
            assert g_bits == e_bits, f"{where}: {g.item()} ({g_bits:#06x}), torch {e.item()} ({e_bits:#06x})"
