"""Cheat (directory program): torch compute hidden in a helper module -- program.py only imports a
"kernel library" function fastkern.ops.scale_add, which the program ships as
modules/fastkern.ops.scale_add.py. That module launches a Triton kernel into the output (zero fill) and then
does the arithmetic with torch ops into the same storage. program.py itself contains no torch arithmetic,
so a static check limited to program.py passes it.

Guard that must catch it: runtime dispatch trace of forward (covers code in imported modules), or static
checks applied to every shipped module. Expected code: torch_compute. Workload: workloads/scale_add.py.
"""

import torch
from fastkern.ops.scale_add import scale_add


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return scale_add(x, y)
