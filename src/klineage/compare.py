"""Numerical comparison of a program's outputs with the float64 reference. Pure functions over tensors; a finding is
a `Finding` value with a stable code, so callers can tell a NaN from a wrong shape from a subtle mismatch."""

from __future__ import annotations

from dataclasses import dataclass

from klineage.config import Tolerance

POISON_BYTE = 0xFF  # every byte of a fresh allocation in forward; 0xFF.. is NaN in every float dtype, -1 in ints


@dataclass(frozen=True)
class Finding:
    """One reason a check failed: a stable `code` and a human `detail`."""

    code: str
    detail: str


def dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def flatten_outputs(out) -> list:
    if isinstance(out, (tuple, list)):
        return list(out)
    return [out]


def is_poison(t):
    """Boolean mask of elements whose bytes are all still the poison pattern."""
    import torch

    raw = t.detach().reshape(-1).contiguous().view(torch.uint8).reshape(-1, t.element_size())
    return (raw == POISON_BYTE).all(-1).reshape(t.shape)


def compare_output(out, ref64, expected, tol: Tolerance, label: str) -> Finding | None:
    """Compare one output with the float64 reference `ref64`; `expected` is the reference computed in the workload's
    own dtype (its shape and dtype are what the program must return)."""
    import torch

    if not isinstance(out, torch.Tensor):
        return Finding("not_a_tensor", f"{label} is a {type(out).__name__}, not a torch.Tensor")
    if type(out) is not torch.Tensor:
        return Finding("tensor_subclass", f"{label} is a {type(out).__name__}, a Tensor subclass (lazy tensors fail)")
    if out.layout != torch.strided or out.is_meta or (out.numel() and out.untyped_storage().data_ptr() == 0):
        return Finding("tensor_subclass", f"{label} has no real storage")
    if tuple(out.shape) != tuple(expected.shape):
        return Finding("shape_mismatch", f"{label} has shape {tuple(out.shape)}, expected {tuple(expected.shape)}")
    if out.dtype != expected.dtype:
        return Finding(
            "dtype_mismatch", f"{label} has dtype {dtype_name(out.dtype)}, expected {dtype_name(expected.dtype)}"
        )
    if out.device != expected.device:
        return Finding("device_mismatch", f"{label} is on {out.device}, expected {expected.device}")
    if out.numel() == 0:
        return None
    if not out.is_floating_point():
        if not torch.equal(out.cpu(), ref64.to(out.dtype).cpu()):
            wrong = int((out.cpu() != ref64.to(out.dtype).cpu()).sum())
            return Finding("mismatch", f"{label}: {wrong} of {out.numel()} integer elements differ")
        return None
    o = out.detach().double()
    r = ref64.detach().double().to(o.device)
    # where the exact answer overflows the output dtype, the representable answer is +-Inf
    rounded = r.to(out.dtype).double()
    r = torch.where(torch.isinf(rounded) & torch.isfinite(r), rounded, r)
    poison = is_poison(out)
    ref_finite = torch.isfinite(r)
    nan_bad = torch.isnan(o) & ~torch.isnan(r)
    if bool((nan_bad & poison & ref_finite).any()):
        n = int((nan_bad & poison).sum())
        return Finding("unwritten_output", f"{label}: {n} of {o.numel()} elements never written (still poison)")
    if bool(nan_bad.any()):
        return Finding("nan_mismatch", f"{label}: NaN at {int(nan_bad.sum())} elements where the reference has none")
    inf_bad = torch.isinf(o) & (o != r)
    if bool(inf_bad.any()):
        return Finding("nan_mismatch", f"{label}: Inf at {int(inf_bad.sum())} elements where the reference has none")
    missing = (torch.isnan(r) & ~torch.isnan(o)) | (torch.isinf(r) & (o != r))
    if bool(missing.any()):
        return Finding("nan_mismatch", f"{label}: {int(missing.sum())} NaN/Inf elements of the reference not matched")
    fo, fr = o[ref_finite], r[ref_finite]
    if fo.numel() == 0:
        return None
    diff = (fo - fr).abs()
    scale = float(fr.pow(2).mean().sqrt()) or 1.0
    bound = tol.rtol * fr.abs() + tol.atol * scale
    bad = diff > bound
    ref_norm = float(fr.norm()) or 1.0
    rel_norm = float(diff.norm()) / ref_norm
    if rel_norm > tol.norm or bool(bad.any()):
        worst = int(torch.argmax(diff - bound))
        return Finding(
            "mismatch",
            f"{label}: relative error norm {rel_norm:.3g} (limit {tol.norm:g}); {int(bad.sum())} of {fo.numel()} "
            f"elements beyond rtol {tol.rtol:g} + atol {tol.atol:g}*rms; worst {float(fo[worst]):.6g} vs "
            f"{float(fr[worst]):.6g}",
        )
    return None


def relative_error(out, ref64) -> float:
    """||out - ref|| / ||ref|| over finite reference elements (a metric, not a verdict)."""
    import torch

    o = out.detach().double()
    r = ref64.detach().double().to(o.device)  # on the device: a bench-sized output is not copied to the host
    keep = torch.isfinite(r) & torch.isfinite(o)
    if not bool(keep.any()):
        return 0.0
    return float((o[keep] - r[keep]).norm()) / (float(r[keep].norm()) or 1.0)


def bitwise_equal(a, b) -> bool:
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    flat = lambda t: t.detach().reshape(-1).contiguous().view(torch.uint8)
    return torch.equal(flat(a), flat(b))
