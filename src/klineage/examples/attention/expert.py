"""Expert attention forward: the flash-attention algorithm (tiled Q K^T, online softmax, P V accumulated in
fp32, no S x S matrix in memory), written for KLineage from the algorithm.

Optimization families carried (numbers refer to the optimization catalog):
  10  @triton.autotune over four tile configs keyed on (N_CTX, HEAD_DIM, CAUSAL), with an early prune that
      keeps only the smallest tile for short sequences; every config is correct on every shape (all tile
      edges are handled below) and the grid reads BLOCK_M from META. Each config's pre_hook sets the K/V
      descriptors' box to its key block (so KLineage's autotune_single_config family leaves it alone).
  4   EVEN heuristic (N_CTX % BLOCK_M == 0; every config's BLOCK_N divides its BLOCK_M, so N_CTX is then a
      multiple of BLOCK_N too) selecting unmasked K/V loads in the masked stage. It sits below the autotuner,
      so it sees the BLOCK_M of the chosen config.
  5   causal loop splitting: stage 1 walks the key blocks that every row of the query block sees in full
      (strictly below the diagonal when causal, every full block otherwise) with no mask at all; stage 2
      walks the diagonal block(s) (causal) or the partial last block (non-causal) with the masks.
  7   TMA tensor descriptors for the stage-1 K/V tiles (host-side, over the (B * H * S, D) view): on the H200
      this stage is nearly all of the work, and TMA copies free the threads of address arithmetic (in a first
      H200 run, the pointer-only version took 1.23 ms at the 128 x 128, 3-stage tile against 1.08 ms with TMA
      K/V loads; docs/BENCHMARKS.md).
      Q, O and the short masked stage keep pointer accesses with masks.
  17  online softmax: running max and sum per row, the accumulator rescaled as the max grows.
  18  exp2 instead of exp: sm_scale * log2(e) is folded into one qk_scale (made on the host), applied by the
      same FMA that subtracts the running max, so each score costs one FMA and one ex2; the running max and
      sum live in log2 units.
  12  program ordering: batch x head major, query blocks inside, so programs running together share one
      head's K and V in L2; under the causal mask each head starts with its heaviest query block (block m
      visits m + 1 key blocks), so the programs launched last are the short ones.
  27  int64 batch/head offsets: B * H * S * D may exceed 2**31 elements in the domain.
  2   tl.multiple_of / tl.max_contiguous hints on the block starts and the head-dim offsets.
  13  per-loop pipelining: stage 1 runs at the config's num_stages; the short diagonal stage (at most
      BLOCK_M // BLOCK_N iterations) pins num_stages=2, one block of prefetch, which covers it.
  24  fp32 accumulator and softmax statistics; tl.dot on half-precision tiles (tensor cores, exact products),
      P rounded to the input dtype only as the operand of P V; the output cast on the store.
"""

import math

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

LOG2E = 1.4426950408889634


def _kv_box(nargs):
    # The K/V descriptors' box is one key block of the launched config (the host makes them with a placeholder).
    box = [nargs["BLOCK_N"], nargs["HEAD_DIM"]]
    nargs["desc_k"].block_shape = box
    nargs["desc_v"].block_shape = box


def _configs():
    # BLOCK_N divides BLOCK_M in every config (the EVEN heuristic relies on it). Shared memory (bf16, D = 128):
    # Q 32 KiB + num_stages x (K + V) tiles of BLOCK_N x 128 x 2 bytes, at most 224 KiB (of the 227 an sm_90
    # block may use). The last, small tile is for short sequences.
    return [
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128}, num_warps=8, num_stages=3, pre_hook=_kv_box),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_warps=8, num_stages=3, pre_hook=_kv_box),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_warps=8, num_stages=4, pre_hook=_kv_box),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 32}, num_warps=4, num_stages=3, pre_hook=_kv_box),
    ]


SHORT_SEQUENCE = 256


def _prune(configs, named_args, **kwargs):
    # A short sequence has a handful of query blocks per head: the launch is latency bound and benchmarking
    # tiles for it costs more than it saves, so only the smallest tile is kept.
    if named_args["N_CTX"] > SHORT_SEQUENCE:
        return configs
    return [min(configs, key=lambda c: c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"])]


@triton.jit
def _online_softmax_block(acc, l_i, m_i, qk, v, qk_scale):
    # qk: raw scores of one key block (fp32, -inf where masked); m_i, l_i: running max and sum in log2 units.
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    p = tl.exp2(qk * qk_scale - m_new[:, None])
    alpha = tl.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    acc = tl.dot(p.to(v.dtype), v, acc)
    return acc, l_i, m_new


@triton.autotune(configs=_configs(), key=["N_CTX", "HEAD_DIM", "CAUSAL"],
                 prune_configs_by={"early_config_prune": _prune})  # fmt: skip
@triton.heuristics({"EVEN": lambda args: args["N_CTX"] % args["BLOCK_M"] == 0})
@triton.jit
def _attn_fwd(
    Q, K, V, Out, desc_k, desc_v,
    qk_scale, N_CTX, H,
    stride_z, stride_h, stride_m,
    HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EVEN: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    n_m = tl.cdiv(N_CTX, BLOCK_M)
    # (batch x head)-major: the programs that run together read the same head's K and V (L2 reuse).
    off_hz = (pid // n_m).to(tl.int64)
    kv_row = (pid // n_m) * N_CTX  # this head's first row in the (B * H * S, D) view of K and V (TMA: int32)
    start_m = pid % n_m
    if CAUSAL:
        # Heaviest query block of each head first: the programs left for the tail are the short ones.
        start_m = n_m - 1 - start_m
    base = (off_hz // H) * stride_z + (off_hz % H) * stride_h

    q_start = tl.multiple_of(start_m * BLOCK_M, BLOCK_M)
    offs_m = q_start + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.max_contiguous(tl.multiple_of(tl.arange(0, HEAD_DIM), HEAD_DIM), HEAD_DIM)
    # Q is read once per program: its row mask is off the hot path. Rows past N_CTX load zeros and are not stored.
    q = tl.load(Q + base + offs_m[:, None] * stride_m + offs_d[None, :], mask=offs_m[:, None] < N_CTX, other=0.0)
    # Stage 2 rebuilds K and V addresses from start_n (scalar base + one offset tile) rather than carrying
    # pointer tensors across the loops: carried, they kept the sm_90 compile at 255 registers and spilling.
    kv_offs = offs_n[:, None] * stride_m + offs_d[None, :]
    k_base = K + base
    v_base = V + base

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)

    # Stage 1: key blocks that every row of this query block sees in full. Causal: the blocks left of the
    # diagonal block (q_start is a multiple of BLOCK_N). Otherwise: every full key block. No mask of any kind,
    # and all of them inside this head, so the tensor-memory-accelerator (TMA) loads through the host's
    # (B * H * S, D) descriptors need no bounds either: one thread issues each K/V tile copy, no address math.
    if CAUSAL:
        mid = q_start
    else:
        mid = (N_CTX // BLOCK_N) * BLOCK_N
    for start_n in range(0, mid, BLOCK_N):
        k = desc_k.load([kv_row + start_n, 0])
        v = desc_v.load([kv_row + start_n, 0])
        acc, l_i, m_i = _online_softmax_block(acc, l_i, m_i, tl.dot(q, tl.trans(k)), v, qk_scale)

    # Stage 2: the blocks that need a mask: the diagonal block (causal, BLOCK_M // BLOCK_N key blocks, the last
    # one cut at N_CTX) or the partial last key block (non-causal; none when EVEN).
    if CAUSAL:
        hi = tl.minimum(q_start + BLOCK_M, N_CTX)
    else:
        hi = N_CTX
    for start_n in tl.range(mid, hi, BLOCK_N, num_stages=2):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        offs_kv = start_n + offs_n
        kv = start_n * stride_m + kv_offs
        if EVEN:
            k = tl.load(k_base + kv)
            v = tl.load(v_base + kv)
        else:
            # Keys past N_CTX load zeros; the score mask below removes them from the softmax.
            k = tl.load(k_base + kv, mask=offs_kv[:, None] < N_CTX, other=0.0)
            v = tl.load(v_base + kv, mask=offs_kv[:, None] < N_CTX, other=0.0)
        keep = offs_kv[None, :] < N_CTX
        if CAUSAL:
            keep = keep & (offs_kv[None, :] <= offs_m[:, None])
        # Every row keeps at least key 0 or an earlier block's maximum, so m_new stays finite (no NaN).
        qk = tl.where(keep, tl.dot(q, tl.trans(k)), float("-inf"))
        acc, l_i, m_i = _online_softmax_block(acc, l_i, m_i, qk, v, qk_scale)

    # One reciprocal per row instead of a division per element.
    out = acc * (1.0 / l_i)[:, None]
    o_ptrs = Out + base + offs_m[:, None] * stride_m + offs_d[None, :]
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=offs_m[:, None] < N_CTX)


class ModelNew(torch.nn.Module):
    def __init__(self, causal: bool = True):
        super().__init__()
        self.causal = causal

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        # One (B, H, S, D) contiguous layout for q, k, v and O: one set of strides, unit stride along D, and K, V
        # viewed as (B * H * S, D) matrices for the TMA descriptors, whose base must be 16-byte aligned.
        q, k, v = (x if x.is_contiguous() and x.data_ptr() % 16 == 0 else x.clone(memory_format=torch.contiguous_format)
                   for x in (q, k, v))  # fmt: skip
        B, H, S, D = q.shape
        o = torch.empty_like(q)
        qk_scale = LOG2E / math.sqrt(D)  # sm_scale * log2(e)
        # Placeholder box: the config's pre_hook sets it to (BLOCK_N, D) before each launch.
        desc_k = TensorDescriptor(k, shape=[B * H * S, D], strides=[D, 1], block_shape=[16, D])
        desc_v = TensorDescriptor(v, shape=[B * H * S, D], strides=[D, 1], block_shape=[16, D])
        grid = lambda META: (triton.cdiv(S, META["BLOCK_M"]) * B * H,)
        _attn_fwd[grid](
            q, k, v, o, desc_k, desc_v,
            qk_scale, S, H,
            q.stride(0), q.stride(1), q.stride(2),
            HEAD_DIM=D, CAUSAL=self.causal,
        )  # fmt: skip
        return o
