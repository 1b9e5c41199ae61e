"""A Triton program for KernelBench level 1's 100_HingeLoss (mean of clamp(1 - p * t, min=0)), written here. Its
targets have one value per row of `predictions` but broadcast, as PyTorch aligns shapes from the last dimension,
along each row's columns: element (i, j) takes targets[j]. The reference's sizes keep rows == columns."""

import torch
import triton
import triton.language as tl


@triton.jit
def hinge_parts(p_ptr, t_ptr, part_ptr, n, cols, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    p = tl.load(p_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    t = tl.load(t_ptr + offs % cols, mask=mask, other=0.0).to(tl.float32)
    loss = tl.maximum(1.0 - p * t, 0.0)
    tl.store(part_ptr + pid, tl.sum(tl.where(mask, loss, 0.0), axis=0))


@triton.jit
def mean_of_parts(part_ptr, out_ptr, parts, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, parts, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(part_ptr + offs, mask=offs < parts, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) / n)


class ModelNew(torch.nn.Module):
    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        p, t = predictions.contiguous(), targets.contiguous()
        n, BLOCK = p.numel(), 1024
        parts = triton.cdiv(n, BLOCK)
        part = torch.empty(parts, dtype=torch.float32, device=p.device)
        out = torch.empty((), dtype=torch.float32, device=p.device)
        hinge_parts[(parts,)](p, t, part, n, p.shape[-1], BLOCK=BLOCK)
        mean_of_parts[(1,)](part, out, parts, n, BLOCK=1024)
        return out.to(predictions.dtype)
