"""Control (must PASS): honest out = 2 * x + y for workloads/scale_add.py, written by the kernel into every other
element of a wider buffer and returned as a compact copy, the accumulator's dtype asked of `torch.promote_types`.

Two things real wrappers do that compute nothing: FlagGems's index_select returns `out.permute(order).contiguous()`
(a copy of what its kernel wrote), its cat, stack and kron ask `torch.promote_types`. The gate refused both once
(output_not_from_kernel, torch_compute; docs/RESULTS.md#wild-gates).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_add_kernel(x_ptr, y_ptr, out_ptr, N, stride_out, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs * stride_out, 2.0 * x + y, mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        x = x.contiguous()
        y = y.contiguous()
        N = x.numel()
        dtype = torch.promote_types(x.dtype, y.dtype)
        wide = torch.empty((N, 2), dtype=dtype, device=x.device)
        column = wide[:, 0]
        BLOCK = 256
        _scale_add_kernel[(triton.cdiv(N, BLOCK),)](x, y, column, N, column.stride(0), BLOCK=BLOCK)
        return column.contiguous()
