"""RMSNorm through Liger-Kernel's installed forward kernel (liger_kernel.ops.rms_norm).

Shows that a program may launch kernels from an installed package: forward only hands the tensors to
rms_norm_forward, which allocates Y and RSTD and launches _rms_norm_forward_kernel (or the row-blocked
variant for narrow rows). casting_mode="llama" computes rstd in fp32 and multiplies by w in the input
dtype, as LLaMA does. Needs liger-kernel (the "experts" extra).

Under the Triton interpreter, Liger's eps.to(tl.float32) needs the harness's float-scalar patch
(the interpreter passes float arguments as Python floats).
"""

import torch
from liger_kernel.ops.rms_norm import rms_norm_forward


class ModelNew(torch.nn.Module):
    def __init__(self, eps: float = 1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        # rms_norm_forward views X as (-1, N) and assumes unit strides.
        y, *_ = rms_norm_forward(
            x.contiguous(), w.contiguous(), self.eps, offset=0.0, casting_mode="llama", row_mode=None
        )
        return y
