"""The project's expert matmul (examples/matmul/expert.py) on the CPU: both of its kernels pass the compile gate for
sm_90 and the correctness gate through the interpreter, and its autotune prune keeps what fits."""

import importlib.util

import pytest
import torch

from klineage.check import check
from klineage.program import Program, load_program
from klineage.workload import load_workload
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.interpreter

WORKLOAD = EXAMPLES / "matmul" / "workload.py"
EXPERT = EXAMPLES / "matmul" / "expert.py"
AUTO = 'def __init__(self, path: str = "auto")'


def _forced(path: str) -> Program:
    """The expert with its dispatch forced to one kernel (the default of ModelNew's `path` argument)."""
    program = load_program(EXPERT)
    assert AUTO in program.source
    return Program(f"expert-{path}", program.source.replace(AUTO, AUTO.replace('"auto"', f'"{path}"')))


def _labels(verdict) -> list[str]:
    return [s["specialization"] for s in verdict.evidence["specializations"]]


def test_expert_passes_on_cpu_through_both_kernels_as_on_a_gpu(settings, sandbox):
    report = check(load_workload(WORKLOAD), load_program(EXPERT), settings, "cpu", ("compile", "correctness"), sandbox)
    compile_v, correct_v = report.verdicts
    assert compile_v.passed, compile_v.reason
    assert correct_v.passed, f"{correct_v.code}: {correct_v.reason}"
    # CUDA mapped to the CPU: the dispatch reads `a.is_cuda` and sm_90, so the aligned cases take TMA and the
    # unaligned one (N odd) the pointer kernel, as on an H200 (before the mapping answered `is_cuda`, only the
    # pointer kernel ran here)
    kernels = sorted(k.rsplit(".", 1)[-1] for k in correct_v.evidence["kernels"])
    assert kernels == ["matmul_kernel", "matmul_tma_kernel"], kernels
    assert "Tensor.is_cuda" in correct_v.evidence["cuda_mapped"]
    assert compile_v.metrics["tma_instructions"] > 0  # UTMALDG / UTMASTG in the sm_90 SASS
    assert compile_v.metrics["tensor_core_instructions"] > 0  # wgmma on sm_90
    assert compile_v.metrics["spill_bytes"] == 0
    # The bench case (driven without launching) compiles TMA's big tiles; the unaligned case the pointer kernel,
    # pruned to 64x64, its ragged K loop masked.
    labels = _labels(compile_v)
    assert any("128, 256, 64" in s for s in labels)
    assert any("64, 64, 64" in s and "False" in s for s in labels)


def test_forced_tma_kernel_compiles_for_sm90_and_runs_in_the_interpreter(settings, sandbox, tmp_path):
    # the workload's `unaligned` case (N odd) is the one a TMA path cannot take: forced, it refuses that case
    report = check(load_workload(WORKLOAD), _forced("tma"), settings, "cpu", ("compile", "correctness"), sandbox)
    assert not report.passed and "16-byte aligned" in report.verdicts[-1].reason
    aligned = tmp_path / "workload.py"
    text = WORKLOAD.read_text()
    # and a domain that says so: the CPU check also draws a shape from DOMAIN, and an odd N or K is not TMA's
    aligned_domain = '"N": [8 * i for i in range(1, 2049)],\n    "K": [8 * i for i in range(1, 2049)],'
    aligned.write_text(
        text.replace('"unaligned": {"M": 48, "N": 41, "K": 72, "dtype": "float16"},', "").replace(
            '"N": [1, 16384],\n    "K": [1, 16384],', aligned_domain
        )
    )
    assert "8 * i" in aligned.read_text()
    assert aligned.read_text() != text
    report = check(load_workload(aligned), _forced("tma"), settings, "cpu", ("compile", "correctness"), sandbox)
    compile_v, correct_v = report.verdicts
    assert compile_v.passed, compile_v.reason
    assert correct_v.passed, f"{correct_v.code}: {correct_v.reason}"
    assert [k.rsplit(".", 1)[-1] for k in correct_v.evidence["kernels"]] == ["matmul_tma_kernel"]
    assert compile_v.metrics["tma_instructions"] > 0  # UTMALDG / UTMASTG in the sm_90 SASS
    assert compile_v.metrics["tensor_core_instructions"] > 0
    assert compile_v.metrics["max_load_bits"] == 0  # every global load goes through TMA
    assert compile_v.metrics["spill_bytes"] == 0


def _expert_module():
    spec = importlib.util.spec_from_file_location("matmul_expert_under_test", EXPERT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tiles(configs) -> list[tuple[int, int, int, int]]:
    return [(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"], c.num_stages) for c in configs]


def test_prune_drops_configs_too_big_for_the_problem_or_shared_memory():
    expert = _expert_module()
    configs = expert._configs()
    half = torch.empty(0, dtype=torch.bfloat16)

    def prune(M, N, K, a=half, tma=False):
        fn = expert._prune_tma if tma else expert._prune_pointer
        return _tiles(fn(configs, {"M": M, "N": N, "K": K, "a_ptr": a}))

    assert prune(8192, 8192, 8192) == _tiles(configs)  # every 16-bit config fits 227 KiB
    assert prune(8192, 8192, 8192, tma=True) == _tiles(configs)
    assert prune(48, 40, 72) == [(64, 64, 64, 4)]  # the tiny case: no 128- or 256-wide tile
    # 100 rows: a 256-row tile would be mostly padding, 128 rows stay
    assert prune(100, 8192, 8192) == [(128, 256, 64, 3), (128, 256, 64, 4), (128, 128, 64, 4), (64, 64, 64, 4)]
    # 4-byte elements double the pipeline: only the 64x64 tile still fits in shared memory
    assert prune(8192, 8192, 8192, a=torch.empty(0, dtype=torch.float32)) == [(64, 64, 64, 4)]
    # smaller than every tile: the smallest one that fits is kept, never an empty list
    assert prune(8, 8, 8) == [(64, 64, 64, 4)]
