"""Family 9 on an autotuner's config list built at run time: every config's num_warps / num_stages set, its tiles kept.

A kernel autotuned over `configs=runtime.get_tuned_config("naive_reduction")` (FlagGems's libtuner reads its
lists from YAML files inside the package) holds its warps and stages in no source line: the launch knobs family
skips autotuned launches (their configs own the knobs), and the launch-configuration search reads only literal
`triton.Config` lists. 26 of the wild suite's 57 programs call into a FlagGems module that tunes over such lists
(read off flag_gems 5.0.2's sources); on the eight row reductions among them the autotune baseline found no
candidate in any H100 run after autotuned launches were left alone (one evaluation each), while torch.compile of the
same op ran x1.19-x1.36 faster in the same references round (RESULTS.md#wild-headroom). Timed outside the tool on
an H100 the warps are not that gap: x1.02-x1.04 on amax, x1.00 on sum_dim, x0.96-x0.97 on var (the same section).
"""

from __future__ import annotations

import re

import libcst as cst

from klineage.carry import literal_int
from klineage.transform import WARPS_AND_STAGES, dotted, node_code, register, wrapped
from klineage.transforms._anchored import imported_modules
from klineage.transforms.autotune_single_config import call_arg, config_list, first_only, is_autotuner
from klineage.transforms.launch_knobs import ScopedNodeTransform

KNOBS = ("num_warps", "num_stages")
# what a `triton.Config` carries besides its meta-parameters and the two knobs, kept from each config as it was
# (Triton 3.6's Config(kwargs, num_warps, num_stages, num_ctas, maxnreg, pre_hook, ir_override))
KEPT = ("num_ctas", "maxnreg", "pre_hook", "ir_override")
ITEM = "config"  # the comprehension's variable


def _copy(item: str, knobs: dict[str, str]) -> str:
    """The comprehension's element: the config `item` with `knobs` set, everything else kept."""
    parts = [f"{item}.kwargs"]
    parts += [f"{k}={knobs.get(k, f'{item}.{k}')}" for k in KNOBS]
    parts += [f"{k}={item}.{k}" for k in KEPT]
    return f"triton.Config({', '.join(parts)})"


def _bare(code: str) -> str:
    return re.sub(r"\s+", "", code)


def _knobs_of(comp: cst.ListComp) -> tuple[dict[str, str], cst.BaseExpression] | None:
    """(the knobs set, the list iterated) for the form this family writes, else None."""
    loop = comp.for_in
    if loop.ifs or loop.inner_for_in is not None or not isinstance(loop.target, cst.Name) or loop.asynchronous:
        return None
    item = loop.target.value
    element = comp.elt
    if not isinstance(element, cst.Call) or dotted(element.func) != "triton.Config":
        return None
    keywords = {a.keyword.value: node_code(a.value) for a in element.args if a.keyword is not None}
    knobs = {k: v for k, v in keywords.items() if k in KNOBS and v != f"{item}.{k}"}
    if not knobs or _bare(node_code(element)) != _bare(_copy(item, knobs)):  # as written here, however laid out
        return None
    return knobs, loop.iter


def _valid(params: dict) -> dict[str, str]:
    """The knobs of `params`; warps a power of two up to 32, stages 1 to 8, where they are literals."""
    values = {k: str(v) for k, v in params.items() if k in KNOBS}
    if not values:
        raise KeyError("num_warps")
    warps, stages = literal_int(values.get("num_warps")), literal_int(values.get("num_stages"))
    if warps is not None and not (1 <= warps <= 32 and warps & (warps - 1) == 0):
        raise ValueError(f"num_warps={warps}: a power of two up to 32")
    if stages is not None and not 1 <= stages <= 8:
        raise ValueError(f"num_stages={stages}: 1 to 8")
    return values


@register
class ConfigKnobs(ScopedNodeTransform):
    """Intent: an autotuner whose configs come from a list built at run time (a library's tuning files) tunes the
    tiles; the warp count and pipeline depth those files fixed for all of them may not suit this kernel, this
    shape or this GPU, and no source line states them.

    Expert form: a Triton kernel's autotune decorator (Triton's, or a library's given `configs=` and `key=`, as
    FlagGems's `@libtuner`) with
    `configs=[triton.Config(config.kwargs, num_warps=8, num_stages=config.num_stages, num_ctas=config.num_ctas,
    maxnreg=config.maxnreg, pre_hook=config.pre_hook, ir_override=config.ir_override) for config in EXPR]`, one
    or both knobs set. Simple form: `configs=EXPR`. Params: each knob set, as source text. Optimize wraps a list
    that is not a literal one (`config_list` cannot read it, nor is it cut to its first config) in that
    comprehension; the module must `import triton`. Every config keeps its tiles, CTAs, register cap and hooks.

    Conditions: num_stages x the loop's tile bytes must fit in shared memory (shared_memory_fits); the warp count
    a power of two no larger than 32.

    Failure: configs that differed only in warps or stages become copies (the autotuner benchmarks each; slower
    to tune, never wrong); too many stages for a tile fail to compile ("out of resources: shared memory"); too
    few warps for a wide tile spill registers. Results never change: the knobs only decide how the same program
    is scheduled."""

    id = "config_knobs"
    family = 9
    tag = "M"
    cost = 2
    conditions = ("shared_memory_fits",)
    intent = "set the warps and stages of an autotuner's run-time config list, its tiles kept"
    node_type = cst.Decorator
    forward_rank = 1
    launch_configuration = WARPS_AND_STAGES
    needs_timing = True
    tuned_to_kernel = True
    interpreter_blind = "the interpreter has no warps or pipeline stages"

    def _scoped_run(self, source, match, rewrite, target):
        self._module = wrapped(source).module
        self._imports_triton = "triton" in imported_modules(self._module)
        return super()._scoped_run(source, match, rewrite, target)

    def _configs(self, node: cst.Decorator) -> cst.Arg | None:
        """The `configs=` argument of a kernel's autotune decorator, else None."""
        if not self.in_kernel() or not is_autotuner(node) or not isinstance(node.decorator, cst.Call):
            return None
        return call_arg(node.decorator, "configs", 0)

    def expert(self, node):
        configs = self._configs(node)
        if configs is None or not isinstance(configs.value, cst.ListComp):
            return None
        found = _knobs_of(configs.value)
        return dict(found[0]) if found else None

    def simple(self, node, params):
        configs = self._configs(node)
        _, listed = _knobs_of(configs.value)
        return node.with_changes(decorator=node.decorator.deep_replace(configs, configs.with_changes(value=listed)))

    def plain(self, node):
        configs = self._configs(node)
        if configs is None or not self._imports_triton:
            return None
        expr = configs.value
        if isinstance(expr, cst.List | cst.ListComp) or first_only(expr) is not None:
            return None  # literal (the launch-configuration search's), or cut to one config (nothing to tune)
        if config_list(expr, self._module) is not None:
            return None
        return {}

    def optimized(self, node, params):
        configs = self._configs(node)
        comp = cst.parse_expression(f"[{_copy(ITEM, _valid(params))} for {ITEM} in {node_code(configs.value)}]")
        return node.with_changes(decorator=node.decorator.deep_replace(configs, configs.with_changes(value=comp)))

    def default_params(self):
        return {"num_warps": "8"}
