"""Tuned matmul in the style of Triton tutorial 03 and the legacy triton.ops matmul.

Optimization families carried (numbers refer to the optimization catalog):
  10  @triton.autotune over a short config list keyed on (M, N, K); every config is correct on
      every shape, because all tile edges are handled below.
  12  grouped program-id ordering (GROUP_SIZE_M): consecutive programs share A row-panels and B
      column-panels in L2. The min() keeps the last, shorter group a bijection.
  3   modulo-wrapped row/column offsets (offs % M, offs % N): the A/B loads need no M/N mask. Valid
      because each C row depends only on its own A row (and each C column on its own B column);
      wrapped rows/columns compute values that the masked store discards.
  2   tl.multiple_of / tl.max_contiguous hints on those offsets (as in triton.ops.matmul): they let the
      compiler vectorize the loads. At a wrapped edge tile the run is broken at M or N, but a wide load
      also needs the row stride (N for B) to be a multiple of 16, which makes the break fall on a
      vector boundary.
  4   EVEN_K heuristic (K % BLOCK_K == 0) selecting an unmasked K loop. It sits below @triton.autotune
      so it is evaluated with the BLOCK_K of the chosen config.
  13  software pipelining through num_stages in the configs.
  19  row/column offsets recomputed after the K loop instead of kept live across it.
  24  fp32 accumulator; the result is cast to the input dtype only on the store.
"""

import torch
import triton
import triton.language as tl


def _configs():
    # Shared memory per config (bf16/fp16): num_stages * (BLOCK_M + BLOCK_N) * BLOCK_K * 2 bytes,
    # each at most 192 KiB, within the 227 KiB an sm_90 block may use.
    return [
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_SIZE_M": 8}, num_stages=3, num_warps=8),
        triton.Config({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8}, num_stages=3, num_warps=8),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8}, num_stages=4, num_warps=4),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_SIZE_M": 8}, num_stages=3, num_warps=8),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_SIZE_M": 8}, num_stages=4, num_warps=4),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8}, num_stages=4, num_warps=4),
    ]


@triton.autotune(configs=_configs(), key=["M", "N", "K"])
@triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})
@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr, EVEN_K: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    # Grouped ordering: walk GROUP_SIZE_M tile-rows column by column before moving on.
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    # The last group may have fewer rows; without the min() some tiles would be computed twice and
    # others never.
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # Wrap instead of mask: out-of-range rows/columns re-read valid memory and are dropped at the store.
    ram = tl.max_contiguous(tl.multiple_of(rm % M, BLOCK_M), BLOCK_M)
    rbn = tl.max_contiguous(tl.multiple_of(rn % N, BLOCK_N), BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + ram[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rbn[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            # K is a multiple of BLOCK_K: every K step is full, no predication in the hot loop.
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            # Only the K tail needs a mask; zeros contribute nothing to the dot product.
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=rk[None, :] < k_left, other=0.0)
            b = tl.load(b_ptrs, mask=rk[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(c_ptr.dtype.element_ty)

    # Recompute the output offsets here rather than keeping rm/rn live through the K loop.
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    # The store mask is what makes the wrapped loads safe: it must stay.
    tl.store(c_ptrs, c, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        # Unit stride along K for A and along N for B is what the alignment hints count on.
        a = a.contiguous()
        b = b.contiguous()
        M, K = a.shape
        _, N = b.shape
        c = torch.empty((M, N), dtype=a.dtype, device=a.device)
        grid = lambda META: (triton.cdiv(M, META["BLOCK_M"]) * triton.cdiv(N, META["BLOCK_N"]),)
        matmul_kernel[grid](
            a, b, c, M, N, K,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        )  # fmt: skip
        return c
