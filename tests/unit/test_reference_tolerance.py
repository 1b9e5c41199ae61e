"""A workload's tolerance must pass PyTorch's own implementation in that dtype: otherwise an expert that computes as
carefully as PyTorch fails its own gate (the attention expert did on the H200 bench case under the old bf16 floor)."""

import math

import pytest
import torch

from klineage.compare import compare_output
from klineage.workload import load_workload
from tests.conftest import EXAMPLES


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_pytorch_sdpa_passes_the_attention_tolerance_on_a_long_causal_case(dtype):
    torch.manual_seed(0)
    wl = load_workload(EXAMPLES / "attention" / "workload.py")
    q, k, v = (torch.randn(1, 2, 4096, 64, dtype=getattr(torch, dtype)) for _ in range(3))
    scores = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(64)
    scores = scores.masked_fill(~torch.ones(4096, 4096, dtype=torch.bool).tril(), float("-inf"))
    ref = torch.softmax(scores, -1) @ v.double()
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert compare_output(out, ref, out, wl.tolerance(dtype), "out") is None
    # and the floor still means something: a zeroed block of rows fails it
    broken = out.clone()
    broken[:, :, 1000:1100] = 0
    assert compare_output(broken, ref, out, wl.tolerance(dtype), "out").code == "mismatch"
