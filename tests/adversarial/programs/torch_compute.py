"""Cheat: no kernel at all -- forward computes the row softmax with a torch op.

This is the "baseline kernel" hack (the program simply calls PyTorch). The answer is exactly right.
Guard that must catch it: the torch-compute ban (static AST check and/or a runtime dispatch trace of forward
showing an arithmetic aten op, plus "no Triton kernel launched"). Expected code: torch_compute.
Workload: workloads/softmax.py.
"""

import torch


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.nn.functional.softmax(x, dim=-1)
