"""Family 13 (pipelining knobs): tl.range(..., num_stages=, warp_specialize=, flatten=) in kernel loops."""

from __future__ import annotations

import libcst as cst

from klineage.transform import dotted, node_code, register
from klineage.transforms.launch_knobs import ScopedNodeTransform, append_kwargs, drop_trailing

# Loop knobs of software pipelining. loop_unroll_factor is compile-time unrolling (family 30): a loop that has it
# is left alone.
KNOBS = ("num_stages", "warp_specialize", "flatten", "disallow_acc_multi_buffer")


def _positional(call: cst.Call) -> int:
    """Number of plain positional arguments before the keywords; -1 if the call has starred arguments or more
    than range's three."""
    if any(a.star for a in call.args):
        return -1
    n = sum(1 for a in call.args if a.keyword is None)
    if not 1 <= n <= 3 or any(a.keyword is None for a in call.args[n:]):
        return -1
    return n


@register
class Pipelining(ScopedNodeTransform):
    """Intent: per-loop software pipelining: `num_stages` prefetches that many iterations' loads ahead into
    shared memory, `warp_specialize` splits producer and consumer warps (Hopper/Blackwell), `flatten` merges a
    persistent outer loop with the inner one so the pipeline does not drain between tiles.

    Expert form: `for i in tl.range(a, b, c, num_stages=3, warp_specialize=True, flatten=True):` inside a
    Triton kernel, with any of those keywords (and disallow_acc_multi_buffer) and no others. Simple form:
    `for i in range(a, b, c):` (the kernel-wide default pipelining). Params: each knob's value as source text.
    Optimize turns `range(...)` or a knob-less `tl.range(...)` in a kernel into `tl.range(..., knobs)`. Loops
    with loop_unroll_factor (family 30), starred or more than three positional arguments are skipped.

    Conditions: warp specialization and the TMA-fed pipelines it relies on need sm_90 or newer (arch_sm90);
    num_stages x the bytes each iteration stages must fit in shared memory (shared_memory_fits).

    Failure: too many stages fail to compile with "out of resources: shared memory"; warp_specialize on an older
    architecture, or on a loop whose loads are not through TMA, is rejected at compile time or ignored. Results
    never change: the knobs only reorder when loads are issued."""

    id = "pipelining"
    family = 13
    tag = "M"
    cost = 2
    conditions = ("arch_sm90", "shared_memory_fits")
    intent = "software-pipeline a kernel loop (stages, warp specialization, flattening) instead of the defaults"
    node_type = cst.For
    forward_rank = 2
    needs_timing = True
    tuned_to_kernel = True
    interpreter_blind = "the interpreter does not pipeline loops"

    def expert(self, node):
        call = node.iter
        if not self.in_kernel() or not isinstance(call, cst.Call) or dotted(call.func) != "tl.range":
            return None
        n = _positional(call)
        keywords = call.args[n:] if n > 0 else ()
        if n < 0 or not keywords or any(a.keyword.value not in KNOBS for a in keywords):
            return None
        return {a.keyword.value: node_code(a.value) for a in keywords}

    def simple(self, node, params):
        call = drop_trailing(node.iter, len(node.iter.args) - _positional(node.iter))
        return node.with_changes(iter=call.with_changes(func=cst.Name("range")))

    def plain(self, node):
        call = node.iter
        if not self.in_kernel() or not isinstance(call, cst.Call) or dotted(call.func) not in ("range", "tl.range"):
            return None
        if _positional(call) != len(call.args):  # keywords already (or odd arguments)
            return None
        return {}

    def optimized(self, node, params):
        values = {k: v for k, v in params.items() if k in KNOBS}
        if not values:
            raise KeyError("num_stages")
        func = cst.Attribute(value=cst.Name("tl"), attr=cst.Name("range"))
        return node.with_changes(iter=append_kwargs(node.iter.with_changes(func=func), values))

    def default_params(self):
        return {"num_stages": "3"}
