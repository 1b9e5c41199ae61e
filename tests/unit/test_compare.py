import pytest
import torch

from klineage.compare import POISON_BYTE, compare_output, is_poison
from klineage.config import DEFAULT_TOLERANCES

TOL32 = DEFAULT_TOLERANCES["float32"]


def ref_and_expected(n=1000, scale=1.0, dtype=torch.float32):
    ref = torch.randn(n, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * scale
    return ref, ref.to(dtype)


def code(out, ref, exp, tol=TOL32):
    finding = compare_output(out, ref, exp, tol, "output 0")
    return finding.code if finding else None


def test_exact_passes_and_fp16_compute_fails_fp32():
    ref, exp = ref_and_expected()
    assert code(exp.clone(), ref, exp) is None
    assert code(exp.half().float(), ref, exp) == "mismatch"  # a precision downgrade beyond fp32 tolerance


def test_zero_output_fails_even_on_tiny_values():
    ref, exp = ref_and_expected(scale=1e-6)  # |out| < any fixed atol: the KernelBench #165 hole
    assert code(torch.zeros_like(exp), ref, exp) == "mismatch"


def test_poison_means_unwritten():
    ref, exp = ref_and_expected()
    out = exp.clone()
    out.view(torch.uint8)[:40] = POISON_BYTE
    assert is_poison(out)[:10].all() and not is_poison(out)[10:].any()
    assert code(out, ref, exp) == "unwritten_output"


def test_nan_inf_and_structure():
    ref, exp = ref_and_expected()
    out = exp.clone()
    out[3] = float("nan")
    assert code(out, ref, exp) == "nan_mismatch"
    out = exp.clone()
    out[5] = float("inf")
    assert code(out, ref, exp) == "nan_mismatch"
    assert code(exp[:-1].clone(), ref, exp) == "shape_mismatch"
    assert code(exp.double(), ref, exp) == "dtype_mismatch"
    assert code([1.0], ref, exp) == "not_a_tensor"


def test_reference_nan_must_be_matched():
    ref, exp = ref_and_expected()
    ref[7] = float("nan")
    exp = ref.float()
    assert code(exp.clone(), ref, exp) is None
    out = exp.clone()
    out[7] = 0.0
    assert code(out, ref, exp) == "nan_mismatch"


def test_subclass_is_rejected():
    class Lazy(torch.Tensor):
        pass

    ref, exp = ref_and_expected()
    assert code(exp.clone().as_subclass(Lazy), ref, exp) == "tensor_subclass"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_rounding_passes(dtype):
    ref, exp = ref_and_expected(dtype=dtype)
    tol = DEFAULT_TOLERANCES[str(dtype).removeprefix("torch.")]
    assert code(exp.clone(), ref, exp, tol) is None
    assert code((exp.float() * 1.05).to(dtype), ref, exp, tol) == "mismatch"


def test_overflow_of_the_output_dtype_matches_inf():
    ref = torch.tensor([1.0, 70000.0, -80000.0], dtype=torch.float64)
    exp = ref.half()
    assert torch.isinf(exp[1:]).all()
    assert code(exp.clone(), ref, exp, DEFAULT_TOLERANCES["float16"]) is None
