"""Expert matmul C = A @ B (bf16/fp16 in, fp32 accumulation, C in the input dtype), written for this project.

Two kernels behind one host dispatch:

* `matmul_tma_kernel` (sm_90 and newer): A, B and C are read and written through tensor descriptors built on the
  device (`tl.make_tensor_descriptor`), so tiles move through the TMA copy engine into shared memory and the
  tensor cores (wgmma) read them from there. TMA zero-fills out-of-range reads and clips out-of-range writes, so
  the kernel has no masks at all. Taken when a CUDA device of compute capability >= 9 runs the call and every
  operand is row-major with a 16-byte aligned base and row stride (what a TMA descriptor requires). The
  descriptors need a global scratch buffer per program, provided through `triton.set_allocator`.
* `matmul_kernel` (everywhere else: operands a descriptor cannot take, older GPUs): pointer loads.

`ModelNew(path="pointer" | "tma")` forces one kernel. Without a GPU, KLineage maps CUDA to the CPU
(klineage.cuda_on_cpu): the dispatch reads its operands as CUDA tensors on an sm_90 device and picks as on an H200,
so the workload's aligned cases take the TMA kernel and its unaligned case the pointer kernel; the compile gate
compiles both for sm_90 and the interpreter runs both (Triton 3.6's interpreter implements tensor descriptors).

Measured on an H200, bf16 8192^3, by benchmarks/matmul_vs_cublas.py (docs/BENCHMARKS.md): both kernels within 4% of
torch.mm; the pointer kernel was 0-2% faster than the TMA one there, and a persistent form of the TMA kernel (one
program per multiprocessor walking the tiles with `tl.range(..., flatten=True)`) was about 1% slower than this one,
so it was not kept.

Optimization families carried (numbers refer to the optimization catalog):
  10  @triton.autotune over a short config list keyed on (M, N, K), with an early prune that drops configs
      whose tile dwarfs the problem or whose pipeline does not fit in shared memory.
  12  grouped program-id ordering (GROUP_M tile-rows walked column by column) for L2 reuse of A and B panels.
  3   modulo-wrapped row/column offsets feeding the A/B loads (no M/N masks in the K loop); the store keeps
      its mask on the unwrapped offsets.
  2   tl.multiple_of / tl.max_contiguous on those offsets, and tl.assume facts about the strides.
  4   EVEN_K heuristic (K % BLOCK_K == 0) beneath the autotuner, selecting a mask-free K loop.
  13  software pipelining through each config's num_stages (cp.async on the pointer path, TMA on sm_90).
  24  fp32 accumulator; one cast to the output dtype on the store.
"""

import torch
import triton
import triton.language as tl

# Shared memory one block may use on sm_90 (227 KiB); used when no CUDA device can be asked.
_SM90_SHARED_BYTES = 232448


def _configs():
    # Pipeline bytes per config (16-bit inputs): num_stages * (BLOCK_M + BLOCK_N) * BLOCK_K * 2.
    # 128x256x64 at 3 stages is 144 KiB, at 4 stages 192 KiB; 128x128x64 at 4 stages is 128 KiB.
    return [
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=3, num_warps=8),
        triton.Config({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=3, num_warps=8),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=4, num_warps=8),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=4, num_warps=4),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=4, num_warps=4),
    ]


def _shared_limit() -> int:
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        return int(getattr(props, "shared_memory_per_block_optin", 0) or _SM90_SHARED_BYTES)
    return _SM90_SHARED_BYTES


def _prune(configs, named_args, epilogue_tile: bool):
    """Keep the configs that fit the problem and shared memory; never return an empty list.

    A tile edge is kept only when it does not exceed the problem's edge rounded up to a power of two (at least
    16): a 256-row tile on a 48-row problem computes 80% padding. The pipeline buffers (and, for the TMA kernel,
    the output tile staged for the TMA store, which reuses them once the K loop is done) must fit in the block's
    shared memory, or the config fails to compile with "out of resources"."""
    M, N, K = named_args["M"], named_args["N"], named_args["K"]
    elem = named_args["a_ptr"].element_size()
    limit = _shared_limit()
    edge_m = max(16, triton.next_power_of_2(M))
    edge_n = max(16, triton.next_power_of_2(N))
    edge_k = max(16, triton.next_power_of_2(K))
    kept = []
    for config in configs:
        bm, bn, bk = config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"], config.kwargs["BLOCK_K"]
        shared = max(config.num_stages * (bm + bn) * bk * elem, bm * bn * elem if epilogue_tile else 0)
        if shared > limit:
            continue
        if bm > edge_m or bn > edge_n or bk > edge_k:
            continue
        kept.append(config)
    if kept:
        return kept
    # Every config is bigger than the problem: take the one with the smallest tile that fits shared memory.
    fitting = [c for c in configs if c.num_stages * (c.kwargs["BLOCK_M"] + c.kwargs["BLOCK_N"]) * c.kwargs["BLOCK_K"]
               * elem <= limit] or list(configs)  # fmt: skip
    return [min(fitting, key=lambda c: (c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"]))]


def _prune_pointer(configs, named_args, **kwargs):
    return _prune(configs, named_args, epilogue_tile=False)


def _prune_tma(configs, named_args, **kwargs):
    return _prune(configs, named_args, epilogue_tile=True)


@triton.autotune(configs=_configs(), key=["M", "N", "K"], prune_configs_by={"early_config_prune": _prune_pointer})
@triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})
@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):  # fmt: skip
    # Facts the host guarantees; they let the compiler drop sign handling from the address arithmetic.
    tl.assume(stride_am > 0)
    tl.assume(stride_ak > 0)
    tl.assume(stride_bk > 0)
    tl.assume(stride_bn > 0)
    tl.assume(stride_cm > 0)
    tl.assume(stride_cn > 0)
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    # Programs that run together cover GROUP_M tile-rows and sweep the columns: A panels and B panels are both
    # reused from L2. The last group can be shorter; the min() keeps the mapping one-to-one there.
    per_group = GROUP_M * tiles_n
    group = pid // per_group
    row0 = group * GROUP_M
    rows_here = min(tiles_m - row0, GROUP_M)
    pid_m = row0 + ((pid % per_group) % rows_here)
    pid_n = (pid % per_group) // rows_here

    # Rows (columns) past M (N) wrap around and re-read valid data; the store below drops them.
    offs_am = tl.max_contiguous(tl.multiple_of((pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M, BLOCK_M), BLOCK_M)
    offs_bn = tl.max_contiguous(tl.multiple_of((pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N, BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_tile = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_tile = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            # Every K step is whole: no predicate in the hot loop.
            a = tl.load(a_tile)
            b = tl.load(b_tile)
        else:
            # The last K step is partial; zero padding adds nothing to the products.
            k_rest = K - kt * BLOCK_K
            a = tl.load(a_tile, mask=offs_k[None, :] < k_rest, other=0.0)
            b = tl.load(b_tile, mask=offs_k[:, None] < k_rest, other=0.0)
        acc = tl.dot(a, b, acc)
        a_tile += BLOCK_K * stride_ak
        b_tile += BLOCK_K * stride_bk

    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_tile = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    # This mask is what makes the wrapped loads above safe.
    tl.store(c_tile, acc.to(c_ptr.dtype.element_ty), mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@triton.autotune(configs=_configs(), key=["M", "N", "K"], prune_configs_by={"early_config_prune": _prune_tma})
@triton.jit
def matmul_tma_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_bk, stride_cm,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):  # fmt: skip
    # Descriptors over the whole row-major operands; block_shape is the tile one TMA copy moves.
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1], block_shape=[BLOCK_M, BLOCK_N])
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    group = pid // per_group
    row0 = group * GROUP_M
    rows_here = min(tiles_m - row0, GROUP_M)
    pid_m = row0 + ((pid % per_group) % rows_here)
    pid_n = (pid % per_group) // rows_here
    m0 = pid_m * BLOCK_M
    n0 = pid_n * BLOCK_N

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # TMA reads past K (and past M, N) as zeros: the last, partial K step needs no mask.
    for kt in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([m0, kt * BLOCK_K])
        b = b_desc.load([kt * BLOCK_K, n0])
        acc = tl.dot(a, b, acc)
    # The store clips rows and columns past M and N.
    c_desc.store([m0, n0], acc.to(c_desc.dtype))


def _tma_scratch(size: int, alignment: int, stream):
    # Global memory where each program writes its device-side descriptors before using them.
    return torch.empty(size, dtype=torch.int8, device="cuda")


def _tma_layout(t: torch.Tensor) -> bool:
    """Row-major with a unit inner stride, 16-byte aligned base and row stride: what a TMA descriptor takes."""
    return t.stride(1) == 1 and (t.stride(0) * t.element_size()) % 16 == 0 and t.data_ptr() % 16 == 0


class ModelNew(torch.nn.Module):
    """`path`: "auto" (TMA on sm_90+ when the layout allows, else pointers), "pointer" or "tma" (skips the device
    check, for compiling or interpreting the TMA kernel without a GPU; the layout must still allow TMA)."""

    def __init__(self, path: str = "auto"):
        super().__init__()
        if path not in ("auto", "pointer", "tma"):
            raise ValueError(f"path must be auto, pointer or tma, not {path!r}")
        self.path = path

    def _use_tma(self, a, b, c) -> bool:
        if self.path == "pointer":
            return False
        layout_ok = _tma_layout(a) and _tma_layout(b) and _tma_layout(c)
        if self.path == "tma":
            if not layout_ok:
                raise ValueError("path='tma' needs row-major operands with 16-byte aligned bases and row strides")
            return True
        return (layout_ok and a.is_cuda and torch.cuda.is_available()
                and torch.cuda.get_device_capability(a.device)[0] >= 9)  # fmt: skip

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        M, K = a.shape
        _, N = b.shape
        c = torch.empty((M, N), dtype=a.dtype, device=a.device)
        grid = lambda META: (triton.cdiv(M, META["BLOCK_M"]) * triton.cdiv(N, META["BLOCK_N"]),)
        if self._use_tma(a, b, c):
            triton.set_allocator(_tma_scratch)
            matmul_tma_kernel[grid](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0))
        else:
            matmul_kernel[grid](
                a, b, c, M, N, K,
                a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            )  # fmt: skip
        return c
