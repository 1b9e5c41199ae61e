"""Evaluation: methods x instances under one budget, with references, correctness escapes and a stamped report.

An instance is a workload, the program an optimizer starts from, and optionally the expert program it is compared
with (bench.suites). Per instance and method (bench.metrics): final speedup over the starting program, fraction of
the expert's speed, fraction of the roofline, speedup over `torch.compile`, gate evaluations until 95% of the final
speedup, share of candidates that failed a gate, and correctness escapes: every final program that differs from its
start is re-checked with hidden seeds and with probe cases inside the workload's domain; a failure there that the
starting program does not have is an escape. References (PyTorch eager, `torch.compile`, the expert, the start) are
timed in one job (bench.references), the programs side by side in a round of their own, eager and `torch.compile` in
theirs; eager and `torch.compile` run the workload's `Model`, or PyTorch's
own op where the instance has one (a wild kernel, whose workload's `Model` is its start). bench.run runs a suite
(bench.engine: on a Dask cluster, one task per instance), bench.report writes what it found, and bench.memory builds
the memory baseline's knowledge base.

The names other modules use are re-exported here."""

from klineage.bench.memory import build_memory
from klineage.bench.metrics import Row, summarize
from klineage.bench.references import Recheck, escapes, references_job
from klineage.bench.report import markdown, plots, write_report
from klineage.bench.run import Queue, merge, run_bench, shard
from klineage.bench.suites import Instance, expert_instances, suite

__all__ = [
    "Instance",
    "Queue",
    "Recheck",
    "Row",
    "build_memory",
    "escapes",
    "expert_instances",
    "markdown",
    "merge",
    "plots",
    "references_job",
    "run_bench",
    "shard",
    "suite",
    "summarize",
    "write_report",
]
