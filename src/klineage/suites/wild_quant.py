"""The quantization suite (`wild-quant`): real Triton kernels whose launches their package does not tune.

Across every GPU run of the wild suite (FlagGems and triton_kernels, RESULTS.md#wild-h100-4) four instances ever kept
a change, each by 1.4-5.6%: FlagGems's kernels are tuned, and the methods tie within noise. This suite takes real
kernels from two installed packages whose launches are fixed by hand, where a method has room to differ. Built as the
wild suite is (klineage.suites.wild: a `WildKernel` per entry, the program its own reference, a `pytorch.py` beside
it that only classifies a rejected start), and held to its disjointness rule (no lineage is mined from either
package: `wild.rule_violations`).

The selection rule, fixed before the suite's first bench run (written after a survey that imported and ran the two
packages' wrappers on the CPU under the interpreter, for correctness only; nothing was timed; RESULTS.md#wild-quant):
- packages: bitsandbytes 0.50.2 (`bitsandbytes.backends.triton.kernels_*`) and torchao 0.18.0 (`torchao.*`);
- an entry per module-level wrapper function that launches a `@triton.jit` kernel of its package, where **no launch
  of the wrapper goes through a `@triton.autotune` of two or more configs** (a one-config autotuner is a fixed
  launch); a wrapper with a tuned launch is left out;
- left out also, each with its reason in `LEFT_OUT`: kernels gated to sm_100 (an H100 or H200 cannot run them),
  multi-GPU communication, host code that needs a package not installed, and a wrapper whose every kernel another
  entry already launches the same way (a near-duplicate module);
- one bench size per entry: its main operand holds 2^24 elements (4096 x 4096, or that many shaped as the wrapper
  requires: a multiple of its block), bf16 where the wrapper asserts it, else fp32; a matmul is 4096 x 4096 x 4096;
- the reference is the program itself; the classifying workload's `Model` is the package's own PyTorch equivalent
  where it ships one, else PyTorch code written here.
"""

from __future__ import annotations

from klineage.suites.wild import WildKernel

# Wrappers with a tuned launch are not entries (the rule's second point), read from the installed source and counted
# on the imported modules (sm_90 as klineage.cuda_on_cpu describes it):
# - torchao.kernel.blockwise_quantization.blockwise_fp8_gemm (48 configs)
# - torchao.prototype.attention.quantization: triton_fp8_sdpa_quantize, triton_fp8_rope_sdpa_quantize (4 configs),
#   triton_fp8_hadamard_sdpa_quantize, triton_fp8_hadamard_rope_sdpa_quantize (3 and 4)
# - torchao.prototype.fp8_sdpa_inference.fp8_sdpa_quantization: qkv_quantize_func, q_quantize_func,
#   kv_quantize_func (4)
# - torchao.prototype.blockwise_fp8_training.kernels: triton_fp8_blockwise_act_quant_{lhs,rhs,transposed_lhs} (45),
#   triton_fp8_blockwise_weight_quant_{rhs,transposed_rhs} (4), triton_fp8_gemm_1x128_128x128, _1x128_128x1 (6)
# - torchao.prototype.blockwise_fp8_training.deepgemm_quant: triton_fp8_blockwise_weight_quant_grouped_
#   {transposed_rhs,rhs}_deepgemm (4), _triton_fp8_blockwise_act_quant_k_grouped_deepgemm_with_group_sizes (45)
# - torchao.prototype.common.triton.matmul.matmul (418; its prune hook also needs pynvml, not installed)
# - torchao.prototype.float8nocompile.kernels.fp8_dynamic_tensorwise: hp_to_fp8_{row_major, row_major_t, col_major,
#   col_major_t, row_and_col_major, row_major_t_and_non_t, col_major_t_and_non_t} (6 or 3), _hp_tensor_to_scale
#   (its atomic path: _amax_atomic, 6)
# - torchao.prototype.hqq.mixed_mm.triton_mixed_mm (18 or 418)
# - torchao.prototype.moe_training.kernels.float8_rowwise.triton_fp8_colwise_3d_scale_and_cast (8)
# - torchao.prototype.moe_training.kernels.jagged_float8_scales: triton_fp8_per_group_rowwise_scales (36),
#   triton_fp8_per_group_colwise_scales (8 and 36), triton_fp8_per_group_colwise_scales_dual (36)
# - torchao.prototype.mx_formats.kernels.triton_mxfp8_dequant_dim0 (24)
# - torchao.prototype.quantized_training.int8_mm.scaled_int8_mm_cuda (27)
# - torchao.prototype.moe_training.nvfp4_training: triton_rht_amax (30), triton_rht_quantize_row_col (24),
#   triton_weight_quantize_2d (36); sm_100 only as well (LEFT_OUT)
# - torchao.prototype.mx_formats.kernels.triton_to_mxfp8_dim0, triton_to_mxfp8_dim1 (24); sm_100 only as well
# bitsandbytes launches no kernel through @triton.autotune (its autotune blocks are commented out).

# wrappers the rule leaves out, with why (the package's own words where it raises)
LEFT_OUT: dict[str, str] = {
    "ao_triton_to_mxfp8_dim0": "sm_100 only: defined when is_sm_at_least_100() and CUDA >= 12.8, else a stub that "
    "raises (torchao.prototype.mx_formats.kernels); its launch is tuned too (24 configs)",
    "ao_triton_to_mxfp8_dim1": "sm_100 only, as ao_triton_to_mxfp8_dim0; tuned too (24 configs)",
    "ao_triton_rht_amax": "sm_100 only: 'requires SM100 (Blackwell)' (nvfp4_training); tuned too (30 configs)",
    "ao_triton_rht_quantize_row_col": "sm_100 only: 'requires SM100 (Blackwell)' (nvfp4_training); tuned too "
    "(24 configs)",
    "ao_triton_weight_quantize_2d": "sm_100 only: 'requires SM100 (Blackwell)' (nvfp4_training); tuned too "
    "(36 configs)",
    "ao__mxfp8_on_device_all_to_all_v": "multi-GPU communication: an all-to-all over torch.distributed symmetric "
    "memory with inline-PTX barriers (moe_training.kernels.mxfp8.comms)",
    "ao_int_matmul_cuda": "near-duplicate of ao_int_matmul_kernel: launches the same kernel through "
    "int_matmul_kernel, with the config torchao's own tuner (kernel/autotuner.py) benchmarks out of "
    "int8_mm_kernel_configs",
    "ao_int_scaled_matmul_cuda": "near-duplicate of ao_int_scaled_matmul_kernel, as ao_int_matmul_cuda",
    "ao_blocksparse_addmm": "near-duplicate of ao_bsr_dense_addmm (torchao.sparsity.blocksparse calls it)",
    "ao_blocksparse_int_addmm": "near-duplicate of ao_bsr_dense_addmm (torchao.sparsity.blocksparse calls it)",
    "bnb_ops": "near-duplicates: bitsandbytes.backends.triton.ops (quantize_blockwise, dequantize_blockwise[_inplace], "
    "quantize_4bit, dequantize_4bit[_inplace], gemv_4bit, optimizer_update_32bit, optimizer_update_8bit_blockwise) "
    "wrap the kernels_* wrappers (the bnb_ entries) with the same launches, registered as XPU ops",
}

BNB = "bitsandbytes.backends.triton."
AO = "torchao."
WEIGHT = {"M": 4096, "N": 4096}  # a 4096 x 4096 weight: 2^24 elements
# a code table's values (a sorted map) and an optimizer's states (a second moment is not negative) are the
# workload's own: a redrawn distribution would make a table no user has
OWN_VALUES = "# code tables and optimizer states are sorted / non-negative as a user's are: no redraw\n"
OWN_VALUES += "DISTRIBUTIONS = ('normal',)\n"
ADAM = "0.9, 0.999, 0.0, 0.0, 1e-8"  # beta1, beta2, beta3, alpha, eps


def _bnb(name, module, function, args, body, reference, sizes, inputs, extra="") -> WildKernel:
    return WildKernel(
        name, "bitsandbytes", "bitsandbytes", BNB + module, function, args, body, reference, sizes, inputs, extra
    )


def _ao(name, module, function, args, body, reference, sizes, inputs, extra="") -> WildKernel:
    return WildKernel(name, "torchao", "torchao", AO + module, function, args, body, reference, sizes, inputs, extra)


def catalogue() -> tuple[WildKernel, ...]:
    """Every entry, in a fixed order (the suite's instance order)."""
    return _bitsandbytes() + _torchao()


def _bitsandbytes() -> tuple[WildKernel, ...]:
    b = _bnb
    return (
        b(
            "bnb_quantize_blockwise_triton",
            "kernels_8bit_quant",
            "quantize_blockwise_triton",
            "A, code",
            "return quantize_blockwise_triton(A, code, 256)",
            "import bitsandbytes  # noqa: F401\nq, absmax = torch.ops.bitsandbytes.quantize_blockwise(A, code, 256)\n"
            "return q.view(A.shape), absmax",
            WEIGHT,
            "[torch.randn(M, N), torch.linspace(-1.0, 1.0, 256)]",
            OWN_VALUES,
        ),
        b(
            "bnb_dequant_8bit_blockwise",
            "kernels_8bit_quant",
            "dequant_8bit_blockwise",
            "a, absmax, code",
            "return dequant_8bit_blockwise(a, absmax, code, 256, dtype=torch.float32)",
            "return (code[a.long()].view(-1, 256) * absmax[:, None]).view(a.shape)",
            WEIGHT,
            "[torch.randint(0, 256, (M, N), dtype=torch.uint8), torch.rand(M * N // 256) + 0.5,"
            " torch.linspace(-1.0, 1.0, 256)]",
        ),
        b(
            "bnb_quantize_4bit_blockwise_triton",
            "kernels_4bit",
            "quantize_4bit_blockwise_triton",
            "A",
            "n = A.numel()\nblocks = -(n // -(64 * 2))\n"
            "absmax = torch.empty((blocks * 2,), device=A.device, dtype=A.dtype)\n"
            "out = torch.empty((n - n // 2, 1), device=A.device, dtype=torch.uint8)\n"
            'return quantize_4bit_blockwise_triton(A, 64, "nf4", blocks, absmax, n, out)',
            "import bitsandbytes  # noqa: F401\n"
            'return tuple(torch.ops.bitsandbytes.quantize_4bit(A.view(-1), 64, "nf4", torch.uint8))',
            WEIGHT,
            "[torch.randn(M, N)]",
        ),
        b(
            "bnb_dequantize_4bit_impl",
            "kernels_4bit",
            "dequantize_4bit_impl",
            "A, absmax",
            "out = torch.empty(A.numel() * 2, dtype=torch.float32, device=A.device)\n"
            'dequantize_4bit_impl(A, absmax, 64, "nf4", torch.float32, out)\nreturn out',
            "import bitsandbytes  # noqa: F401\n"
            'out = torch.ops.bitsandbytes.dequantize_4bit(A, absmax, 64, "nf4", [A.numel() * 2], torch.float32)\n'
            "return out.view(-1)",
            WEIGHT,
            "[torch.randint(0, 256, (M * N // 2, 1), dtype=torch.uint8), torch.rand(M * N // 64) + 0.5]",
        ),
        b(
            "bnb_dequantize_4bit_impl_passing_code",
            "kernels_4bit",
            "dequantize_4bit_impl_passing_code",
            "A, absmax, code",
            "out = torch.empty(A.numel() * 2, dtype=torch.float32, device=A.device)\n"
            "dequantize_4bit_impl_passing_code(A, absmax, 64, code, torch.float32, out)\nreturn out",
            "a = A.view(-1)\nidx = torch.stack([a >> 4, a & 15], 1).view(-1).long()\n"
            "return code[idx] * absmax.repeat_interleave(64)",
            WEIGHT,
            "[torch.randint(0, 256, (M * N // 2, 1), dtype=torch.uint8), torch.rand(M * N // 64) + 0.5,"
            " torch.linspace(-1.0, 1.0, 16)]",
        ),
        b(
            "bnb_optimizer_update_32bit_impl",
            "kernels_optim",
            "optimizer_update_32bit_impl",
            "g, p, state1, state2",
            "# an Adam step on copies: the caller's parameters and states stay as they were\n"
            "p, state1, state2 = p.clone(), state1.clone(), state2.clone()\n"
            f'optimizer_update_32bit_impl("adam", g, p, state1, state2, None, 0.0, 0.0, {ADAM}, 0.0, 3, 1e-3)\n'
            "return p, state1, state2",
            "import bitsandbytes  # noqa: F401\np, state1, state2 = p.clone(), state1.clone(), state2.clone()\n"
            "torch.ops.bitsandbytes.optimizer_update_32bit(\n"
            f'    "adam", g, p, state1, state2, None, 0.0, 0.0, {ADAM}, 0.0, 3, 1e-3, 1.0\n)\n'
            "return p, state1, state2",
            WEIGHT,
            "[0.1 * torch.randn(M, N), torch.randn(M, N), 0.01 * torch.randn(M, N), 1e-4 * torch.rand(M, N)]",
            OWN_VALUES,
        ),
        b(
            "bnb_optimizer_update_8bit_blockwise_impl",
            "kernels_optim",
            "optimizer_update_8bit_blockwise_impl",
            "g, p, state1, state2, qmap1, qmap2, absmax1, absmax2",
            "# an Adam step on copies: the caller's parameters and states stay as they were\n"
            "p, state1, state2 = p.clone(), state1.clone(), state2.clone()\n"
            "absmax1, absmax2 = absmax1.clone(), absmax2.clone()\n"
            "optimizer_update_8bit_blockwise_impl(\n"
            f'    "adam", g, p, state1, state2, {ADAM}, 3, 1e-3, qmap1, qmap2, absmax1, absmax2\n)\n'
            "return p, state1, state2, absmax1, absmax2",
            "from bitsandbytes.backends.triton.kernels_optim import optimizer_update_8bit_blockwise_pytorch\n\n"
            "p, state1, state2 = p.clone(), state1.clone(), state2.clone()\n"
            "absmax1, absmax2 = absmax1.clone(), absmax2.clone()\n"
            "optimizer_update_8bit_blockwise_pytorch(\n"
            f"    p, g, state1, state2, {ADAM}, 3, 1e-3, qmap1, qmap2, absmax1, absmax2, 0.0, 1.0, False,\n"
            '    optimizer_name="adam",\n)\n'
            "return p, state1, state2, absmax1, absmax2",
            WEIGHT,
            "[0.1 * torch.randn(M, N), torch.randn(M, N), torch.randint(0, 256, (M, N), dtype=torch.uint8),\n"
            "        torch.randint(0, 256, (M, N), dtype=torch.uint8), torch.linspace(-1.0, 1.0, 256),"
            " torch.linspace(0.0, 1.0, 256),\n"
            "        0.01 * torch.rand(M * N // 256) + 1e-3, 1e-4 * torch.rand(M * N // 256) + 1e-6]",
            OWN_VALUES,
        ),
    )


FP8 = "torch.float8_e4m3fn"
# fp8 outputs: the program is its own reference (cast by the same interpreter on the CPU, klineage.interp), the
# PyTorch workload only classifies a rejection
MX_SCALES = "[torch.randint(100, 140, (M, N), dtype=torch.uint8)]"
GROUP_OFFSETS = "(torch.arange(1, G + 1) * {dim} // G).to(torch.int32)"


def _custom_op(op: str) -> str:
    """HOST_OPS of a wrapper that is a `torch.library` op (`custom_op`, `triton_op`): the forward guard sees the
    op `op` itself (its kernel launches run inside it), not a PyTorch computation."""
    return f"# the wrapper is the custom op torchao::{op}: its kernels run inside it\nHOST_OPS = ({op!r},)\n"


# The int8 matmul wrappers take their launch as a `triton.Config` argument. Their entries run the first of the
# configs torchao's tuner walks (`torchao.kernel.intmm_triton.int8_mm_kernel_configs[0]`: 32 x 32 x 32 tiles, one
# warp, one stage), spelled out as the literal a caller who fixes one writes (the GPU runs of ca8d143 and before
# passed `int8_mm_kernel_configs[0]` itself: the same launch; `launch_config` reads a literal, not a list's element).
INT8_MM_CONFIG_0 = (
    'triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 8}, num_stages=1, num_warps=1)'
)
# Their PyTorch op is torch._int_mm (torchao's own fallback, safe_int_mm): a matmul of int32 tensors has no CUDA
# kernel ("addmm_cuda" not implemented for 'Int', H100, docs/runs/2026-12-06-h100-wild6), which the CPU allows.
INT8_MM_CONFIG_0_NOTE = "# the first of the configs torchao's tuner walks (int8_mm_kernel_configs[0]), fixed\n"


def _torchao() -> tuple[WildKernel, ...]:
    a = _ao
    return (
        a(
            "ao_int_matmul_kernel",
            "kernel.intmm_triton",
            "int_matmul_kernel",
            "a, b",
            INT8_MM_CONFIG_0_NOTE +
            "c = torch.empty((a.shape[0], b.shape[1]), dtype=torch.int32, device=a.device)\n"
            f"return int_matmul_kernel(a, b, c, {INT8_MM_CONFIG_0})",
            "return torch._int_mm(a, b)",
            {"M": 4096, "K": 4096, "N": 4096},
            "[torch.randint(-128, 128, (M, K), dtype=torch.int8), torch.randint(-128, 128, (K, N), dtype=torch.int8)]",
        ),
        a(
            "ao_int_scaled_matmul_kernel",
            "kernel.intmm_triton",
            "int_scaled_matmul_kernel",
            "a, b, scales1",
            INT8_MM_CONFIG_0_NOTE +
            "c = torch.empty((a.shape[0], b.shape[1]), dtype=scales1.dtype, device=a.device)\n"
            f"return int_scaled_matmul_kernel(a, b, scales1, c, {INT8_MM_CONFIG_0})",
            "return torch._int_mm(a, b) * scales1",
            {"M": 4096, "K": 4096, "N": 4096},
            "[torch.randint(-128, 128, (M, K), dtype=torch.int8), torch.randint(-128, 128, (K, N), dtype=torch.int8),"
            " torch.rand(M, 1) * 0.01]",
        ),
        a(
            "ao_fp8_blockwise_act_quant",
            "kernel.blockwise_quantization",
            "fp8_blockwise_act_quant",
            "x",
            f"return fp8_blockwise_act_quant(x, 128, {FP8})",
            "s = x.view(*x.shape[:-1], -1, 128).abs().amax(-1) / 448.0\n"
            f"return (x.view(*s.shape, 128) / s[..., None]).to({FP8}).view(x.shape), s",
            {"M": 4096, "K": 4096},
            "[torch.randn(M, K)]",
        ),
        a(
            "ao_fp8_blockwise_weight_quant",
            "kernel.blockwise_quantization",
            "fp8_blockwise_weight_quant",
            "x",
            f"return fp8_blockwise_weight_quant(x, 128, {FP8})",
            "m, n = x.shape\nb = x.view(m // 128, 128, n // 128, 128)\ns = b.abs().amax((1, 3)) / 448.0\n"
            f"return (b / s[:, None, :, None]).to({FP8}).view(m, n), s",
            WEIGHT,
            "[torch.randn(M, N)]",
        ),
        a(
            "ao_fp8_blockwise_weight_dequant",
            "kernel.blockwise_quantization",
            "fp8_blockwise_weight_dequant",
            "x, s",
            "return fp8_blockwise_weight_dequant(x, s, 128)",
            "e = s.repeat_interleave(128, 0).repeat_interleave(128, 1)\n"
            "return x.float() * e[: x.shape[0], : x.shape[1]]",
            WEIGHT,
            f"[torch.randn(M, N).to({FP8}), torch.rand((M + 127) // 128, (N + 127) // 128) * 0.01]",
        ),
        a(
            "ao_bsr_dense_addmm",
            "kernel.bsr_triton_ops",
            "bsr_dense_addmm",
            "c, values, crow, col, dense",
            "bsr = torch.sparse_bsr_tensor(crow, col, values, (c.shape[0], dense.shape[0]))\n"
            "return bsr_dense_addmm(c, bsr, dense)",
            "bsr = torch.sparse_bsr_tensor(crow, col, values, (c.shape[0], dense.shape[0]))\n"
            "return c + bsr.to_dense() @ dense",
            {"M": 4096, "K": 4096, "N": 4096},
            "[torch.randn(M, N), torch.randn(M // 32 * (K // 64), 32, 32),"
            " torch.arange(M // 32 + 1) * (K // 64),\n"
            "        ((torch.arange(K // 64) * 2)[None, :] + (torch.arange(M // 32) % 2)[:, None]).flatten(),"
            " torch.randn(K, N)]",
            "# the program assembles the BSR operand from its parts; the wrapper reads them back and counts blocks\n"
            "HOST_OPS = ('sparse_compressed_tensor', 'values', 'crow_indices', 'col_indices', '_nnz')\n",
        ),
        a(
            "ao_inverse_hadamard_transform",
            "prototype.attention.quantization.triton_hadamard_utils",
            "inverse_hadamard_transform",
            "x",
            "return inverse_hadamard_transform(x)",
            "h = torch.ones(1, 1, device=x.device)\nwhile h.shape[0] < x.shape[-1]:  # Sylvester's construction\n"
            "    h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)])\n"
            "return (x.float() @ h / x.shape[-1] ** 0.5).to(x.dtype)",
            {"B": 4, "H": 32, "S": 1024, "D": 128},
            "[torch.randn(B, H, S, D).to(torch.bfloat16)]",
        ),
        a(
            "ao_triton_mx_block_rearrange",
            "prototype.mx_formats.kernels",
            "triton_mx_block_rearrange",
            "scales",
            "return triton_mx_block_rearrange(scales)",
            "from torchao.prototype.mx_formats.utils import to_blocked\n\n"
            "# the wrapper's (rows, cols) padded to whole 128 x 4 blocks\n"
            "rows, cols = -(scales.shape[0] // -128) * 128, -(scales.shape[1] // -4) * 4\n"
            "return to_blocked(scales, use_triton_kernel=False).view(rows, cols)",
            WEIGHT,
            MX_SCALES,
            _custom_op("triton_mx_block_rearrange"),
        ),
        a(
            "ao_triton_mx_block_rearrange_2d_M_groups",
            "prototype.moe_training.kernels.mxfp8.quant",
            "triton_mx_block_rearrange_2d_M_groups",
            "scales, offsets",
            "return triton_mx_block_rearrange_2d_M_groups(scales, offsets)",
            "from torchao.prototype.moe_training.kernels.mxfp8.quant import torch_to_blocked_2d_M_groups\n\n"
            "# the wrapper's offsets end each group in rows of scales, as torchao's reference reads them\n"
            "return torch_to_blocked_2d_M_groups(scales, offsets, 32)[0]",
            {**WEIGHT, "G": 8},
            "[torch.randint(100, 140, (M, N), dtype=torch.uint8), " + GROUP_OFFSETS.format(dim="M") + "]",
            _custom_op("triton_mx_block_rearrange_2d_M_groups"),
        ),
        a(
            "ao_triton_mx_block_rearrange_per_group_3d",
            "prototype.moe_training.kernels.mxfp8.quant",
            "triton_mx_block_rearrange_per_group_3d",
            "scales",
            "return triton_mx_block_rearrange_per_group_3d(scales)",
            "from torchao.prototype.moe_training.kernels.mxfp8.quant import torch_to_blocked_per_group_3d\n\n"
            "return torch_to_blocked_per_group_3d(scales)",
            {"E": 8, "M": 2048, "N": 1024},
            "[torch.randint(100, 140, (E, M, N), dtype=torch.uint8)]",
            _custom_op("triton_mx_block_rearrange_per_group_3d"),
        ),
        a(
            "ao_triton_mx_block_rearrange_2d_K_groups",
            "prototype.moe_training.kernels.mxfp8.quant",
            "triton_mx_block_rearrange_2d_K_groups",
            "scales, offsets",
            "return triton_mx_block_rearrange_2d_K_groups(scales, offsets)",
            "from torchao.prototype.moe_training.kernels.mxfp8.quant import torch_to_blocked_2d_K_groups\n\n"
            "# the wrapper's offsets end each group in columns of scales, as torchao's reference reads them\n"
            "return torch_to_blocked_2d_K_groups(scales, offsets, 32)[0]",
            {**WEIGHT, "G": 8},
            "[torch.randint(100, 140, (M, N), dtype=torch.uint8), " + GROUP_OFFSETS.format(dim="N") + "]",
            _custom_op("triton_mx_block_rearrange_2d_K_groups"),
        ),
        a(
            "ao_fill_indices_wrapper",
            "prototype.moe_training.ep.kernels",
            "fill_indices_wrapper",
            "tokens, start, write_offsets, token_rows",
            "# the experts of a rank and the ranks, from the counts' shapes; the indices address the token rows\n"
            "experts = write_offsets.shape[0]\n"
            "return fill_indices_wrapper(\n"
            "    tokens, start, write_offsets, experts, tokens.shape[0] // experts, token_rows.shape[0]\n)",
            "from torchao.prototype.moe_training.ep.kernels import fill_indices_cpu\n\n"
            "experts = write_offsets.shape[0]\n"
            "return fill_indices_cpu(\n"
            "    tokens.cpu(), start.cpu(), write_offsets.cpu(), experts, tokens.shape[0] // experts,"
            " token_rows.shape[0]\n).to(tokens.device)",
            {"L": 1 << 24, "R": 8, "E": 32},
            "_expert_parallel_counts(L, R, E)",
            _custom_op("_fill_indices_wrapper") + "\n\ndef _expert_parallel_counts(L, R, E):\n"
            '    """L token rows routed from R ranks to R * E experts: counts per (rank, expert), where each count\'s\n'
            '    rows start in the sender\'s order, and where each expert\'s rows go (generate_permute_indices)."""\n'
            "    share = torch.rand(R * E) + 0.5\n"
            "    tokens = (share / share.sum() * (L - R * E)).floor().to(torch.int32)\n"
            "    start = (torch.cumsum(tokens, 0) - tokens).to(torch.int32)\n"
            "    per_expert = tokens.view(R, E).sum(0)\n"
            "    write_offsets = (torch.cumsum(per_expert, 0) - per_expert).to(torch.int32)\n"
            "    return [tokens, start, write_offsets, torch.zeros(L, dtype=torch.int8)]\n",
        ),
        a(
            "ao_triton_permute_bwd",
            "prototype.moe_training.ep.permute",
            "_triton_permute_bwd",
            "grad, indices",
            "return _triton_permute_bwd(grad, indices, grad.shape[0], grad.shape[1])",
            "out = grad.new_zeros(grad.shape)\nkeep = indices >= 0\nout[indices[keep].long()] = grad[keep]\nreturn out",
            WEIGHT,
            "[torch.randn(M, N), torch.where(torch.rand(M) < 0.1, -1, torch.randperm(M)).to(torch.int32)]",
            _custom_op("_triton_permute_bwd"),
        ),
        a(
            "ao_triton_fp8_rowwise_3d_transpose_rhs",
            "prototype.moe_training.kernels.float8_rowwise",
            "triton_fp8_rowwise_3d_transpose_rhs",
            "w",
            f"return tuple(triton_fp8_rowwise_3d_transpose_rhs(w, {FP8}))",
            "from torchao.prototype.moe_training.utils import torch_to_3d_rowwise_float8_transpose_rhs\n\n"
            "# torchao's reference asserts a column-major input: the same values in that layout\n"
            "w_col = w.transpose(-2, -1).contiguous().transpose(-2, -1)\n"
            f"q, s = torch_to_3d_rowwise_float8_transpose_rhs(w_col, {FP8})\n"
            "return q, s.squeeze(-2)",
            {"E": 8, "K": 2048, "N": 1024},
            "[torch.randn(E, K, N)]",
            _custom_op("triton_fp8_rowwise_transpose_rhs"),
        ),
        a(
            "ao_triton_fp8_rowwise_3d_transpose_rhs_fused_reduction",
            "prototype.moe_training.kernels.float8_rowwise",
            "triton_fp8_rowwise_3d_transpose_rhs_fused_reduction",
            "w",
            f"return tuple(triton_fp8_rowwise_3d_transpose_rhs_fused_reduction(w, {FP8}))",
            "from torchao.prototype.moe_training.utils import torch_to_3d_rowwise_float8_transpose_rhs\n\n"
            "# torchao's reference asserts a column-major input: the same values in that layout\n"
            "w_col = w.transpose(-2, -1).contiguous().transpose(-2, -1)\n"
            f"q, s = torch_to_3d_rowwise_float8_transpose_rhs(w_col, {FP8})\n"
            "return q, s.squeeze(-2)",
            {"E": 8, "K": 2048, "N": 1024},
            "[torch.randn(E, K, N)]",
            _custom_op("triton_fp8_rowwise_transpose_rhs_fused"),
        ),
        a(
            "ao_triton_fp8_rowwise_2d_scale_and_cast",
            "prototype.moe_training.kernels.float8_rowwise",
            "triton_fp8_rowwise_2d_scale_and_cast",
            "x",
            f"return tuple(triton_fp8_rowwise_2d_scale_and_cast(x, {FP8}))",
            "# forward scales (448 / amax, in float64 then float32, as the kernel), shaped (M, 1) as the wrapper\n"
            "scale = (448.0 / x.abs().amax(1, keepdim=True).double().clamp_min(1e-12)).float()\n"
            f"return (x.float() * scale).clamp(-448.0, 448.0).to({FP8}), scale",
            WEIGHT,
            "[torch.randn(M, N)]",
            _custom_op("triton_fp8_rowwise_2d_scale_and_cast"),
        ),
    )
