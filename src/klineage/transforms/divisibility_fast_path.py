"""Family 4: divisibility specialization (a heuristic flag selecting a mask-free fast path)."""

from __future__ import annotations

import ast

import libcst as cst

from klineage.transform import dotted, kwarg, node_code, register
from klineage.transforms._anchored import (
    AnchoredTransform,
    Module,
    blocks,
    calls_to,
    drop_item,
    insert_item,
    is_jit,
    leading_comments,
    name_uses,
    names_in,
    replace_node,
    statement_code,
)


def _heuristics(fn: cst.FunctionDef) -> list[tuple[int, cst.Dict]]:
    """(decorator index, dict) for each `@triton.heuristics({...})` / `@triton.heuristics(values={...})`."""
    found = []
    for i, d in enumerate(fn.decorators):
        call = d.decorator
        if not isinstance(call, cst.Call) or dotted(call.func) not in ("triton.heuristics", "heuristics"):
            continue
        if len(call.args) == 1 and isinstance(call.args[0].value, cst.Dict):
            if call.args[0].keyword is None or call.args[0].keyword.value == "values":
                found.append((i, call.args[0].value))
    return found


def _divisibility_flag(element) -> str | None:
    """The flag name of a dict entry `"FLAG": lambda args: <a> % <b> == 0`, else None."""
    if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
        return None
    fn = element.value
    if not isinstance(fn, cst.Lambda) or not isinstance(fn.body, cst.Comparison) or len(fn.body.comparisons) != 1:
        return None
    test = fn.body
    target = test.comparisons[0]
    if not (
        isinstance(test.left, cst.BinaryOperation)
        and isinstance(test.left.operator, cst.Modulo)
        and isinstance(target.operator, cst.Equal)
        and isinstance(target.comparator, cst.Integer)
        and target.comparator.value == "0"
    ):
        return None
    name = ast.literal_eval(element.key.value)
    return name if isinstance(name, str) and name.isidentifier() else None


def _branch(fn: cst.FunctionDef, flag: str) -> cst.If | None:
    """The one `if FLAG: <fast> else: <masked>` of the kernel, where FLAG is used nowhere else in the body."""
    ifs = [b for b in _statements(fn) if isinstance(b, cst.If) and isinstance(b.test, cst.Name)]
    ifs = [b for b in ifs if b.test.value == flag]
    if len(ifs) != 1:
        return None
    branch = ifs[0]
    if not isinstance(branch.orelse, cst.Else) or not isinstance(branch.orelse.body, cst.IndentedBlock):
        return None
    if flag in names_in(branch.body) or flag in names_in(branch.orelse):
        return None
    uses = sum(1 for n in name_uses(fn.body) if n == flag)
    if uses != 1:  # the test itself only
        return None
    if not _masked(branch.orelse):
        return None  # the slow branch must be the masked one
    return branch


def _masked(node: cst.CSTNode) -> bool:
    """A masked tl.load or tl.store under `node`."""
    return any(kwarg(c, "mask") is not None for c in calls_to(node, "tl.load") + calls_to(node, "tl.store"))


def _statements(fn: cst.FunctionDef) -> list[cst.CSTNode]:
    return [s for b in blocks(fn.body) for s in b.body]


@register
class DivisibilityFastPath(AnchoredTransform):
    """Intent: a `@triton.heuristics` flag such as `EVEN_K = K % BLOCK_K == 0` selects, at compile time, a
    branch of the kernel whose loads and stores carry no mask, taking the predication out of the hot loop.

    Conditions: every size the kernel tiles under the flag is a multiple of its block whenever the flag is true.
    The heuristic guarantees this only if it sees the block size of the launch: it must sit beneath
    `@triton.autotune` (evaluated per chosen config), and the flag must not be passed or hard-coded by the host.

    Failure: with the flag true on a size that is not a multiple of the block (a hard-coded flag, a heuristic
    above the autotuner, or one testing a different dimension than the branch uses), the unmasked branch reads
    and writes past the tail: out-of-bounds accesses, garbage accumulated into the result. The simplified kernel
    (the masked branch always) is correct on every shape.

    Sites: a @triton.jit function with a heuristics entry `"FLAG": lambda args: a % b == 0`, the parameter FLAG,
    and exactly one `if FLAG: <fast> else: <masked>` (FLAG used nowhere else; the else branch masks a load or
    store). Simplify: drop the entry (the decorator when it empties), the parameter, and the fast branch; the
    masked branch takes the if's place. Params: `flag`, `heuristic` (the entry's source), `unmasked` (the fast
    branch's source), and what puts them back where they were (`branch`, `masked`, positions, separators).
    Optimize: a @triton.jit function with a masked load or store; needs the expert's params (the fast branch is
    not derived here)."""

    id = "divisibility_fast_path"
    family = 4
    tag = "S"
    cost = 3
    conditions = ("divisible_by_block",)
    intent = "compile a mask-free branch for the launches whose sizes divide by the block"
    forward_rank = 3

    def expert_anchors(self, module: Module):
        found = []
        for fn in module.functions():
            if not is_jit(fn):
                continue
            site = self._expert(fn)
            if site is not None:
                found.append((fn, site))
        return found

    def _expert(self, fn: cst.FunctionDef) -> dict | None:
        names = [p.name.value for p in fn.params.params]
        for dec_index, table in _heuristics(fn):
            for entry_index, element in enumerate(table.elements):
                flag = _divisibility_flag(element)
                if flag is None or flag not in names:
                    continue
                branch = _branch(fn, flag)
                if branch is None:
                    continue
                param = fn.params.params[names.index(flag)]
                return {
                    "flag": flag,
                    "heuristic": node_code(element.with_changes(comma=cst.MaybeSentinel.DEFAULT)),
                    "unmasked": "\n".join(node_code(s) for s in branch.body.body),
                    "branch": statement_code(branch),
                    "masked": [statement_code(s) for s in branch.orelse.body.body],
                    "leading": leading_comments(branch),
                    "decorator": dec_index,
                    "whole_decorator": len(table.elements) == 1,
                    "entry": entry_index,
                    "param": node_code(param.with_changes(comma=cst.MaybeSentinel.DEFAULT)),
                    "param_index": names.index(flag),
                    # separators that dropping the entry and the parameter takes away (see drop_item)
                    "entry_comma": drop_item(table.elements, entry_index)[1],
                    "param_comma": drop_item(fn.params.params, names.index(flag))[1],
                }
        return None

    def simple(self, node, params):
        flag = params["flag"]
        branch = _branch(node, flag)
        masked = list(branch.orelse.body.body)
        masked[0] = masked[0].with_changes(leading_lines=(*branch.leading_lines, *masked[0].leading_lines))
        node = replace_node(node, branch, cst.FlattenSentinel(masked))
        # The parameter, with the separators of its neighbours kept as they were.
        items, _ = drop_item(node.params.params, params["param_index"])
        node = node.with_changes(params=node.params.with_changes(params=items))
        decorators = list(node.decorators)
        dec = decorators[params["decorator"]]
        if params["whole_decorator"]:
            del decorators[params["decorator"]]
        else:
            table = dec.decorator.args[0].value
            elements, _ = drop_item(table.elements, params["entry"])
            call = dec.decorator
            arg = call.args[0].with_changes(value=table.with_changes(elements=elements))
            decorators[params["decorator"]] = dec.with_changes(decorator=call.with_changes(args=[arg]))
        return node.with_changes(decorators=decorators)

    def plain_anchors(self, module: Module):
        found = []
        for fn in module.functions():
            if is_jit(fn) and _masked(fn):
                found.append((fn, {}))
        return found

    def optimized(self, node, params):
        masked = params["masked"]
        run = _find_run(node, masked)
        if run is None:
            raise ValueError("divisibility_fast_path: the masked statements are not in this kernel")
        block, start = run
        stmts = list(block.body[start : start + len(masked)])
        n_lead = len(params.get("leading", []))
        first_leading = stmts[0].leading_lines
        stmts[0] = stmts[0].with_changes(leading_lines=first_leading[n_lead:])
        branch = cst.parse_statement(params["branch"])
        branch = branch.with_changes(
            leading_lines=first_leading[:n_lead] if n_lead else (),
            orelse=branch.orelse.with_changes(body=branch.orelse.body.with_changes(body=stmts)),
        )
        body = [*block.body[:start], branch, *block.body[start + len(masked) :]]
        node = replace_node(node, block, block.with_changes(body=body))
        # Parameter and heuristic back in their places.
        param = cst.parse_statement(f"def f({params['param']}): pass").params.params[0]
        items = insert_item(node.params.params, int(params["param_index"]), param, params.get("param_comma", ", "))
        node = node.with_changes(params=node.params.with_changes(params=items))
        entry = cst.parse_expression("{" + params["heuristic"] + "}").elements[0]
        decorators = list(node.decorators)
        existing = _heuristics(node)
        if existing:
            i, table = existing[0]
            position = min(int(params.get("entry", len(table.elements))), len(table.elements))
            elements = insert_item(table.elements, position, entry, params.get("entry_comma", ", "))
            call = decorators[i].decorator
            arg = call.args[0].with_changes(value=table.with_changes(elements=elements))
            decorators[i] = decorators[i].with_changes(decorator=call.with_changes(args=[arg]))
        else:
            position = min(int(params.get("decorator", 0)), len(decorators))
            new = cst.Decorator(decorator=cst.parse_expression("triton.heuristics({" + params["heuristic"] + "})"))
            decorators.insert(position, new)
        return node.with_changes(decorators=decorators)


def _find_run(fn: cst.FunctionDef, codes: list[str]) -> tuple[cst.IndentedBlock, int] | None:
    for block in blocks(fn.body):
        body = list(block.body)
        for start in range(len(body) - len(codes) + 1):
            if all(statement_code(body[start + k]) == codes[k] for k in range(len(codes))):
                return block, start
    return None
