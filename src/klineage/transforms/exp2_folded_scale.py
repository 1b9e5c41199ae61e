"""Family 18 across host and kernel: base-2 exponentials, with log2(e) folded into the scale the host passes.

The attention expert's host makes `qk_scale = LOG2E / math.sqrt(D)` and its kernel takes `tl.exp2` of the scaled
scores and of the running maxima; the naive attention passes `1.0 / D**0.5` and takes `tl.exp`. `fast_math` only
rewrites the local form (`tl.exp2(x * LOG2E)` in one expression); here the factor lives on the host, so every
value the scale reaches is in log2 units and no multiply by log2(e) is left in the kernel. Measured on an NVIDIA
H200 (torch 2.11, Triton 3.6.0): the naive attention with the causal cut and half-precision P @ V at 128x128 tiles
ran at 2.169 ms with `tl.exp` and at 1.714 ms with the fold (x1.266; `python benchmarks/attention_gap.py`,
RESULTS.md#attention-gap)."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from klineage.transform import Site, Transform, constexpr_params, dotted, node_code, register
from klineage.transforms._anchored import (
    Module,
    bound_once,
    kept,
    kernel_param_for,
    launches,
    names_in,
    nodes_under,
)
from klineage.transforms._kernel_exprs import (
    EXP2,
    LOG2E,
    NOT_VALUES,
    is_log2e_value,
    log2e_names,
    parenthesized,
    plain_call,
)

EXP = {v: k for k, v in EXP2.items()}
# Logarithms in the kernel would read statistics in whichever units the exponentials use: no site where any is.
LOGS = ("tl.log", "tl.log2", "tl.math.log", "tl.math.log2", "tl.log1p", "tl.math.log1p")
ONE = ("1", "1.0", "1.")


@dataclass(frozen=True)
class _Plan:
    """One site: a kernel's scale parameter, the exponentials it reaches (in the kernel and the @triton.jit
    helpers it calls) and the host expressions bound to it (one per launch, or the one assignment they pass)."""

    kernel: str
    param: str
    exps: tuple[cst.Call, ...]
    hosts: tuple[cst.BaseExpression, ...]
    line: int
    params: dict


def _region(module: Module, kernel: cst.FunctionDef) -> list[cst.FunctionDef]:
    """The kernel and the module's @triton.jit functions it calls by name, transitively."""
    jit = module.kernels()
    seen, todo = [kernel], [kernel]
    while todo:
        fn = todo.pop()
        for call in nodes_under(fn.body, cst.Call):
            callee = jit.get(dotted(call.func))
            if callee is not None and callee not in seen:
                seen.append(callee)
                todo.append(callee)
    return seen


def _calls(fns: list[cst.FunctionDef], names: dict | tuple) -> list[cst.Call]:
    return [c for fn in fns for c in nodes_under(fn.body, cst.Call) if dotted(c.func) in names]


def _hosts(module: Module, kernel: cst.FunctionDef, param: str) -> list[cst.BaseExpression] | None:
    """The host expressions bound to `param` at every launch of `kernel`; None where a launch does not bind it by
    a plain argument (a star argument, a default)."""
    found: list[cst.BaseExpression] = []
    for fn in module.host_functions():
        for call in launches(fn):
            if call.func.value.value != kernel.name.value:
                continue
            if any(a.star for a in call.args):
                return None
            arg = next((a for a in call.args if kernel_param_for(kernel, call, a) == param), None)
            if arg is None:
                return None
            value = arg.value
            if isinstance(value, cst.Name) and value.value not in {p.name.value for p in fn.params.params}:
                # a name the launching function assigns once: its value is the expression to rescale
                value = bound_once(fn).get(value.value, value)
            if all(value is not seen for seen in found):
                found.append(value)
    return found or None


def _factor(node: cst.BaseExpression, names: set[str]) -> dict | None:
    """How a host expression carries log2(e) as its outermost factor: `c / x` (div), `x * c` or `c * x`."""

    def is_log2e(n):
        return (isinstance(n, cst.Name) and n.value in names) or is_log2e_value(n)

    if not isinstance(node, cst.BinaryOperation) or node.lpar:
        return None
    if isinstance(node.operator, cst.Divide) and is_log2e(node.left) and not is_log2e(node.right):
        return {"form": "div", "constant": node_code(node.left)}
    if isinstance(node.operator, cst.Multiply):
        if is_log2e(node.right) and not is_log2e(node.left):
            return {"form": "x*c", "constant": node_code(node.right)}
        if is_log2e(node.left) and not is_log2e(node.right):
            return {"form": "c*x", "constant": node_code(node.left)}
    return None


def _assignments(fn: cst.FunctionDef) -> list[tuple[frozenset[str], frozenset[str]]]:
    """(names read, names bound) of each assignment in a function."""
    out = []
    for node in nodes_under(fn.body, (cst.Assign, cst.AugAssign)):
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        out.append((frozenset(names_in(node.value)), frozenset().union(*(names_in(t) for t in targets))))
    return out


def _call_args(fn: cst.FunctionDef) -> list[tuple[str, tuple[frozenset[str] | None, ...]]]:
    """(callee, the names of each argument, None for a keyword argument) of each call in a function."""
    return [
        (dotted(call.func), tuple(frozenset(names_in(a.value)) if a.keyword is None else None for a in call.args))
        for call in nodes_under(fn.body, cst.Call)
    ]


def _tainted(module: Module, fns: list[cst.FunctionDef], kernel: cst.FunctionDef, param: str) -> set[tuple[str, str]]:
    """(function, name) pairs whose value the scale reaches: assignments in a function from a reached name, and
    the parameters of a jit helper called with one, to a fixed point (loop-carried values included). Each
    function's assignments and calls are read once a parse (`Module.once`): walking them again for every pass and
    every parameter took 15.8 of the 29 s (profiled) of the bundled attention expert's round trip."""
    reached = {(kernel.name.value, param)}
    by_name = {fn.name.value: fn for fn in fns}
    changed = True
    while changed:
        changed = False
        for fn in fns:
            mine = {n for f, n in reached if f == fn.name.value}
            for read, bound in module.once(fn, _assignments):
                if read & mine:
                    for name in bound - mine:
                        reached.add((fn.name.value, name))
                        changed = True
            for name, args in module.once(fn, _call_args):
                callee = by_name.get(name)
                if callee is None:
                    continue
                params = [p.name.value for p in callee.params.params]
                for i, arg in enumerate(args):
                    if arg is not None and i < len(params) and arg & mine:
                        if (callee.name.value, params[i]) not in reached:
                            reached.add((callee.name.value, params[i]))
                            changed = True
    return reached


# Calls whose arguments (all of them, or the address and mask) are indices, addresses or trip counts: a scale that
# reaches one is an integer (a stride, a size), not a factor of the exponentials' arguments.
INDEX_ARGS = ("range", "tl.range", "tl.static_range", "tl.arange", "tl.multiple_of", "tl.max_contiguous")
MEMORY = ("tl.load", "tl.store", "tl.make_block_ptr", "tl.advance", "tl.make_tensor_descriptor")


def _address_names(fn: cst.FunctionDef) -> list[frozenset[str]]:
    """The names in each index, address, mask or trip count a function passes."""
    out = []
    for call in nodes_under(fn.body, cst.Call):
        name = dotted(call.func)
        method = call.func.attr.value if isinstance(call.func, cst.Attribute) else ""
        if name in INDEX_ARGS:
            parts = [a.value for a in call.args]
        elif name in MEMORY or name.startswith("tl.atomic_") or method in ("load", "store"):
            parts = [
                a.value
                for i, a in enumerate(call.args)
                if (a.keyword is None and i == 0)
                or (a.keyword is not None and a.keyword.value in ("pointer", "mask", "base", "offsets"))
            ]
            if method in ("load",) and name not in MEMORY:
                parts = [a.value for a in call.args]  # a descriptor's load: every argument is an offset
        else:
            continue
        out.append(frozenset().union(*(names_in(part) for part in parts)))
    return out


def _reaches_addresses(module: Module, fns: list[cst.FunctionDef], reached: set[tuple[str, str]]) -> bool:
    for fn in fns:
        mine = {n for f, n in reached if f == fn.name.value}
        if any(names & mine for names in module.once(fn, _address_names)):
            return True
    return False


def _sums(fn: cst.FunctionDef) -> list[tuple[frozenset[str], frozenset[str]]]:
    """The value names on each side of each sum or difference in a function (constexprs and constants left out)."""
    skip = NOT_VALUES | constexpr_params(fn)
    return [
        (frozenset(names_in(node.left) - skip), frozenset(names_in(node.right) - skip))
        for node in nodes_under(fn.body, cst.BinaryOperation)
        if isinstance(node.operator, cst.Add | cst.Subtract)
    ]


def _mixes_units(module: Module, fns: list[cst.FunctionDef], reached: set[tuple[str, str]]) -> bool:
    """A sum or difference of a value the scale reaches and a value it does not (`x * scale + bias`): after the
    fold only one side would be in log2 units."""
    for fn in fns:
        mine = {n for f, n in reached if f == fn.name.value}
        for left, right in module.once(fn, _sums):
            if bool(left & mine) != bool(right & mine) and (left if not left & mine else right):
                return True
    return False


def _scale_uses_multiply(module: Module, kernel: cst.FunctionDef, param: str) -> bool:
    """The parameter is read in the kernel, and only as a factor of a product."""
    uses = [n for n in nodes_under(kernel.body, cst.Name) if n.value == param]
    if not uses:
        return False
    for name in uses:
        parent = module.parents.get(name)
        if not (isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Multiply)):
            if not (isinstance(parent, cst.Arg) and isinstance(module.parents.get(parent), cst.Call)):
                return False  # a use other than `x * scale` or passing it on to a helper
    return True


def _plans(source: str, plain: bool) -> tuple[Module | None, list[_Plan]]:
    try:
        module = Module(source)
    except cst.ParserSyntaxError:
        return None, []
    log2e = log2e_names(module)
    plans = []
    for kernel in module.kernels().values():
        region = _region(module, kernel)
        if _calls(region, LOGS):
            continue
        present, absent = (EXP, EXP2) if plain else (EXP2, EXP)
        exps = [c for c in _calls(region, present) if plain_call(c, present, 1)]
        if not exps or _calls(region, absent):
            continue
        constexpr = constexpr_params(kernel)
        for p in kernel.params.params:
            param = p.name.value
            if param in constexpr or not _scale_uses_multiply(module, kernel, param):
                continue
            hosts = _hosts(module, kernel, param)
            if hosts is None:
                continue
            # both ways: the scale reaches every exponential (one it does not reach would change base), and no
            # address, trip count or unscaled addend (the fold would change those)
            reached = _tainted(module, region, kernel, param)
            if _reaches_addresses(module, region, reached) or _mixes_units(module, region, reached):
                continue
            if any(not {(module.function_of(c), n) for n in names_in(c.args[0].value)} & reached for c in exps):
                continue
            if plain:
                if any(_factor(h, log2e) is not None for h in hosts):
                    continue
                params = {}
            else:
                factors = [_factor(h, log2e) for h in hosts]
                if any(f is None for f in factors) or any(f["form"] != factors[0]["form"] for f in factors):
                    continue
                params = factors[0]
            plans.append(_Plan(kernel.name.value, param, tuple(exps), tuple(hosts), module.line(hosts[0]), params))
    plans.sort(key=lambda p: p.line)
    return module, plans


def _without_factor(node: cst.BinaryOperation, form: str) -> cst.BaseExpression:
    if form == "div":
        return node.with_changes(left=cst.Float("1.0"))
    return node.left if form == "x*c" else node.right


def _with_factor(node: cst.BaseExpression, form: str, constant: str) -> cst.BaseExpression:
    c = cst.parse_expression(constant)
    if form == "div" and isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide):
        left = node.left
        if isinstance(left, cst.Float | cst.Integer) and left.value in ONE and not node.lpar:
            return node.with_changes(left=c)
    op = cst.Multiply(whitespace_before=cst.SimpleWhitespace(" "), whitespace_after=cst.SimpleWhitespace(" "))
    if form == "c*x":
        right = node if not isinstance(node, cst.BinaryOperation) or node.lpar else parenthesized(node)
        return cst.BinaryOperation(left=c, operator=op, right=right)
    left = node
    if isinstance(node, cst.BinaryOperation) and not node.lpar and not isinstance(node.operator, cst.Multiply):
        left = parenthesized(node)
    return cst.BinaryOperation(left=left, operator=op, right=c)


class _Replace(cst.CSTTransformer):
    def __init__(self, new: dict[int, object]):
        super().__init__()
        self.new = new

    def on_leave(self, original_node, updated_node):
        updated = super().on_leave(original_node, updated_node)
        make = self.new.get(id(original_node))
        return make(updated) if make is not None else updated


def _renamed(call: cst.Call, names: dict[str, str]) -> cst.Call:
    return call.with_changes(func=cst.parse_expression(names[dotted(call.func)]))


@register
class Exp2FoldedScale(Transform):
    """Intent: exponentials in base 2 with log2(e) folded into the scale the host passes, so each `tl.exp2` maps
    to one ex2.approx with no multiply by log2(e) before it, and the scaling, the subtraction of the running
    maximum and that multiply collapse into one fused multiply-add.

    Sites: a @triton.jit kernel whose non-constexpr parameter `scale` is read only as a factor (`x * scale`) or
    passed on to a jit helper, whose every launch binds it to a host expression (or to a name assigned once in the
    launching function, whose value is then the expression), and whose code (with the jit helpers it calls) has no
    logarithm. Simplify: the expert form has `tl.exp2` (no `tl.exp`) and every host expression carries log2(e) as
    its outermost factor (`LOG2E / x`, `x * LOG2E`, `LOG2E * x`; a module constant or the literal); the factor is
    dropped (`1.0 / x`, `x`) and every `tl.exp2` becomes `tl.exp`. Params: `form` (div, x*c or c*x) and `constant`
    (the factor's code). Optimize: the plain form has `tl.exp` (no `tl.exp2`), and every `tl.exp` argument names a
    value the scale reaches through the kernel's assignments (loop-carried ones included) or a helper's parameter;
    the host expressions get the factor (`1.0 / x` becomes `constant / x`; otherwise `x * constant`) and every
    `tl.exp` becomes `tl.exp2`. Where the constant names something the program lacks, the literal is written.

    Conditions: tolerance: ex2.approx of the folded argument differs from exp's in the last bits. What the form
    check cannot see, the correctness gate does: the scale must reach the exponentials only through sums,
    differences, maxima and masks (anything else, such as a scaled value stored or squared, changes the result).

    Failure: an exponential of a value the scale does not reach would be taken in the wrong base (excluded by
    form); statistics read back in natural units (a stored log-sum-exp, a logarithm) would be off by a factor of
    ln 2 (kernels with a logarithm have no site); a scale used outside the exponentials' arguments gives wrong
    results, which the correctness gate catches."""

    id = "exp2_folded_scale"
    family = 18
    tag = "S"
    cost = 3
    conditions = ("tolerance",)
    intent = "fold log2(e) into the host's scale and take exp2 in the kernel: one FMA and one ex2 per element"
    label_params = ("form",)

    def default_params(self) -> dict:
        return {"form": "div", "constant": repr(LOG2E)}

    def _plans(self, source: str, plain: bool) -> tuple[Module | None, list[_Plan]]:
        """A program's plans, the last few kept: `sites` then `simplify` (or `optimize_sites` then `optimize`) plan
        the same program twice."""
        return kept(self, ("plans", plain, source), lambda: _plans(source, plain))

    def _site(self, plan: _Plan, i: int, after: cst.BaseExpression) -> Site:
        return Site(self.id, plan.kernel, i, plan.line, node_code(plan.hosts[0]), node_code(after), plan.params)

    def sites(self, source: str) -> list[Site]:
        _, plans = self._plans(source, plain=False)
        return [self._site(p, i, _without_factor(p.hosts[0], p.params["form"])) for i, p in enumerate(plans)]

    def optimize_sites(self, source: str) -> list[Site]:
        _, plans = self._plans(source, plain=True)
        d = self.default_params()
        return [self._site(p, i, _with_factor(p.hosts[0], d["form"], d["constant"])) for i, p in enumerate(plans)]

    def simplify(self, source: str, site: Site) -> str:
        module, plans = self._plans(source, plain=False)
        plan = self._plan(plans, site)
        new = {id(c): (lambda n: _renamed(n, EXP2)) for c in plan.exps}
        for h in plan.hosts:
            new[id(h)] = lambda n, form=plan.params["form"]: _without_factor(n, form)
        return module.tree.visit(_Replace(new)).code

    def optimize(self, source: str, site: Site, params: dict) -> str:
        module, plans = self._plans(source, plain=True)
        plan = self._plan(plans, site)
        form = params.get("form", "div")
        if form not in ("div", "x*c", "c*x"):
            raise ValueError(f"exp2_folded_scale: unknown form {form!r}")
        constant = params.get("constant", repr(LOG2E))
        value = cst.parse_expression(constant)
        if not is_log2e_value(value) and not (isinstance(value, cst.Name) and value.value in log2e_names(module)):
            constant = repr(LOG2E)  # the expert's constant is not log2(e) here (or not defined): the literal
        new = {id(c): (lambda n: _renamed(n, EXP)) for c in plan.exps}
        for h in plan.hosts:
            new[id(h)] = lambda n: _with_factor(n, form, constant)
        return module.tree.visit(_Replace(new)).code

    def _plan(self, plans: list[_Plan], site: Site) -> _Plan:
        if site.index >= len(plans):
            raise ValueError(f"{self.id}: no site {site.index} in this program")
        return plans[site.index]
