"""Adversarial-corpus workload: scale_add.py's (out = 2 * x + y on a 1D float32 tensor) for programs that wrap their
kernels in a PyTorch custom operator, as torchao's do, so the workload allows that operator on the host
(HOST_OPS). The operator's name is allowed; what its body computes is still the program's, judged like any forward.
"""

from pathlib import Path

# scale_add.py's cases, domain, Model and inputs, read from beside this file: a workload is loaded by its path
exec(compile(Path(__file__).with_name("scale_add.py").read_text(), "scale_add.py", "exec"))

HOST_OPS = ("scale_add_op",)
