"""Family 12: grouped program-id ordering (GROUP_SIZE_M swizzle) in tiled matmul kernels."""

from __future__ import annotations

import ast
from collections import Counter

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from klineage.transform import Site, Transform, dotted, is_kernel, node_code, register
from klineage.transforms._anchored import assignment

# The expert form, with the names the kernel uses (keys are the roles, as in Triton tutorial 03).
GROUPED = """\
{num_pid_in_group} = {GROUP_SIZE_M} * {num_pid_n}
{group_id} = {pid} // {num_pid_in_group}
{first_pid_m} = {group_id} * {GROUP_SIZE_M}
{group_size_m} = {min}({num_pid_m} - {first_pid_m}, {GROUP_SIZE_M})
{pid_m} = {first_pid_m} + (({pid} % {num_pid_in_group}) % {group_size_m})
{pid_n} = ({pid} % {num_pid_in_group}) // {group_size_m}
"""
ROW_MAJOR = """\
{pid_m} = {pid} // {num_pid_n}
{pid_n} = {pid} % {num_pid_n}
"""
# Names the grouped form introduces; simplify drops them, so they must not be used elsewhere.
INTERMEDIATES = ("num_pid_in_group", "group_id", "first_pid_m", "group_size_m")
DEFAULTS = {
    "GROUP_SIZE_M": "8",
    "min": "min",
    "num_pid_in_group": "num_pid_in_group",
    "group_id": "group_id",
    "first_pid_m": "first_pid_m",
    "group_size_m": "group_size_m",
}


def _same(stmts: list[cst.BaseStatement], code: str) -> bool:
    try:
        expected = ast.dump(ast.parse(code))
        return ast.dump(ast.parse("\n".join(node_code(s) for s in stmts))) == expected
    except SyntaxError:
        return False


def _names(node: cst.CSTNode) -> Counter:
    out: Counter = Counter()

    class V(cst.CSTVisitor):
        def visit_Name(self, n):
            out[n.value] += 1

    node.visit(V())
    return out


def _tile_counts(body, i: int) -> tuple[set[str], set[str]]:
    """Names assigned by `tl.program_id(...)` and by `tl.cdiv(...)` / `triton.cdiv(...)` before body[i]."""
    pids, counts = set(), set()
    for stmt in body[:i]:
        a = assignment(stmt)
        if a and isinstance(a[1], cst.Call):
            func = dotted(a[1].func)
            if func in ("tl.program_id", "triton.language.program_id"):
                pids.add(a[0])
            elif func in ("tl.cdiv", "triton.cdiv"):
                counts.add(a[0])
    return pids, counts


def _tiled(body, i: int, context: dict) -> dict | None:
    """The mapping is of a tiled kernel: pid comes from tl.program_id and num_pid_n from a cdiv in the same block,
    which has exactly one other cdiv count, num_pid_m. Both directions require it, so a simplified site is always
    an optimize site again."""
    pids, counts = _tile_counts(body, i)
    others = counts - {context["num_pid_n"]}
    if context["pid"] not in pids or context["num_pid_n"] not in counts or len(others) != 1:
        return None
    (num_pid_m,) = others
    if context.setdefault("num_pid_m", num_pid_m) != num_pid_m:
        return None
    return context


def match_grouped(body, i: int, fn: cst.FunctionDef) -> dict | None:
    """Params (role -> name) when body[i:i+6] is the grouped mapping; else None."""
    if i + 6 > len(body):
        return None
    parts = [assignment(s) for s in body[i : i + 6]]
    if any(p is None for p in parts):
        return None
    (g, g_val), (gid, gid_val), (first, _), (gsm, gsm_val), (pm, _), (pn, _) = parts
    if not (
        isinstance(g_val, cst.BinaryOperation)
        and isinstance(g_val.operator, cst.Multiply)
        and isinstance(g_val.right, cst.Name)
        and isinstance(g_val.left, cst.Name | cst.Integer)
    ):
        return None
    if not (isinstance(gid_val, cst.BinaryOperation) and isinstance(gid_val.left, cst.Name)):
        return None
    if not (
        isinstance(gsm_val, cst.Call)
        and gsm_val.args
        and isinstance(gsm_val.args[0].value, cst.BinaryOperation)
        and isinstance(gsm_val.args[0].value.left, cst.Name)
    ):
        return None
    params = {
        "GROUP_SIZE_M": node_code(g_val.left),
        "min": dotted(gsm_val.func),
        "num_pid_in_group": g,
        "group_id": gid,
        "first_pid_m": first,
        "group_size_m": gsm,
    }
    context = {
        "pid": gid_val.left.value,
        "num_pid_n": g_val.right.value,
        "num_pid_m": gsm_val.args[0].value.left.value,
        "pid_m": pm,
        "pid_n": pn,
    }
    if params["min"] not in ("min", "tl.minimum"):
        return None
    roles = [g, gid, first, gsm, pm, pn, context["pid"], context["num_pid_n"], context["num_pid_m"]]
    if len(set(roles)) != len(roles) or params["GROUP_SIZE_M"] in roles:
        return None
    if not _same(body[i : i + 6], GROUPED.format(**params, **context)):
        return None
    # The intermediates disappear with the rewrite: nothing else in the kernel may read them.
    inside = sum((_names(s) for s in body[i : i + 6]), Counter())
    everywhere = _names(fn.body)
    if any(everywhere[n] != inside[n] for n in (g, gid, first, gsm)) or _tiled(body, i, context) is None:
        return None
    return {**params, **context}


def match_row_major(body, i: int, fn: cst.FunctionDef) -> dict | None:
    """Context (pid, num_pid_n, pid_m, pid_n, num_pid_m) when body[i:i+2] is the row-major mapping of a tiled
    kernel."""
    if i + 2 > len(body):
        return None
    parts = [assignment(s) for s in body[i : i + 2]]
    if any(p is None for p in parts):
        return None
    (pm, pm_val), (pn, _) = parts
    if not (
        isinstance(pm_val, cst.BinaryOperation)
        and isinstance(pm_val.left, cst.Name)
        and isinstance(pm_val.right, cst.Name)
    ):
        return None
    context = {"pid": pm_val.left.value, "num_pid_n": pm_val.right.value, "pid_m": pm, "pid_n": pn}
    if len(set(context.values())) != 4 or not _same(body[i : i + 2], ROW_MAJOR.format(**context)):
        return None
    return _tiled(body, i, dict(context)) or _untiled_m(body, i, context, fn)


def _untiled_m(body, i: int, context: dict, fn: cst.FunctionDef) -> dict | None:
    """A row-major kernel that counts only its column tiles (`num_pid_n = tl.cdiv(N, BLOCK_N)`) can still be
    grouped: optimize first adds `num_pid_m = tl.cdiv(M, BLOCK_M)`, the names read off num_pid_n's with N -> M,
    when the kernel has both as parameters (a naive matmul's usual form)."""
    pids, counts = _tile_counts(body, i)
    if context["pid"] not in pids or counts != {context["num_pid_n"]}:
        return None
    value = next(a[1] for s in body[:i] if (a := assignment(s)) and a[0] == context["num_pid_n"])
    if len(value.args) != 2 or not all(isinstance(a.value, cst.Name) for a in value.args):
        return None
    size, block = (a.value.value for a in value.args)
    if not (size.endswith("N") and block.endswith("N")):
        return None
    params = {p.name.value for p in fn.params.params}
    size_m, block_m = size[:-1] + "M", block[:-1] + "M"
    if size_m not in params or block_m not in params or _names(fn.body)["num_pid_m"]:
        return None
    return {**context, "num_pid_m": "num_pid_m", "num_pid_m_from": f"{dotted(value.func)}({size_m}, {block_m})"}


class _Finder(cst.CSTVisitor):
    """(block, index, params, function name) for each match in the blocks of Triton kernels."""

    def __init__(self, match):
        super().__init__()
        self.match, self.functions, self.found = match, [], []

    def visit_FunctionDef(self, node):
        self.functions.append(node)

    def leave_FunctionDef(self, node):
        self.functions.pop()

    def visit_IndentedBlock(self, node):
        if self.functions and is_kernel(self.functions[-1]):
            for i in range(len(node.body)):
                params = self.match(node.body, i, self.functions[-1])
                if params is not None:
                    self.found.append((node, i, params, self.functions[-1].name.value))


def _find(source: str, match):
    module = cst.parse_module(source)
    finder = _Finder(match)
    module.visit(finder)
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    found = sorted(finder.found, key=lambda f: positions[f[0].body[f[1]]].start.line)
    return module, [(b, i, p, name, positions[b.body[i]].start.line) for b, i, p, name in found]


def _statements(code: str, leading) -> list[cst.BaseStatement]:
    stmts = list(cst.parse_module(code).body)
    stmts[0] = stmts[0].with_changes(leading_lines=leading)
    return stmts


@register
class GroupedOrdering(Transform):
    """Intent: map program ids to output tiles in groups of GROUP_SIZE_M tile-rows walked column by column, so
    programs running at the same time share A row-panels and B column-panels in L2 (TT 03: >10% on A100).

    Expert form (six statements of a kernel, Triton tutorial 03):
        num_pid_in_group = GROUP_SIZE_M * num_pid_n
        group_id = pid // num_pid_in_group
        first_pid_m = group_id * GROUP_SIZE_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
        pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
        pid_n = (pid % num_pid_in_group) // group_size_m
    (any names; `tl.minimum` for `min`; GROUP_SIZE_M a name or an integer). Simple form: row-major
    `pid_m = pid // num_pid_n; pid_n = pid % num_pid_n`. Params: the group size (GROUP_SIZE_M, name or value)
    and the names the expert used for each role, so optimize rewrites the same statements. Comments inside the
    six statements are dropped by simplify (they describe the grouping). A GROUP_SIZE_M kernel parameter stays
    (unused) and the launch or configs keep passing it. Variants (a helper like `_l2_swizzle`, a separate
    `pid_in_group`, XCD remapping) are skipped, as are kernels that read the intermediates elsewhere. Both
    forms are recognized only in a tiled kernel's block where `pid = tl.program_id(..)` and exactly two cdiv tile
    counts (num_pid_m, num_pid_n) are assigned before the mapping; any other `a // n; b % n` pair is left alone.

    Conditions: the grid launches exactly num_pid_m * num_pid_n programs, and the mapping stays a bijection onto
    the tiles: the min() makes the last group, which has fewer than GROUP_SIZE_M tile-rows when num_pid_m is not
    a multiple of GROUP_SIZE_M, walk only its own rows. Shapes that are not multiples of the block
    (divisible_by_block), hence tile counts that are not multiples of the group, are what exercise it.

    Failure: without the min() (or with a wrong group width) some tiles are computed twice and others never:
    parts of C stay uninitialized, only on shapes whose tile-row count is not a multiple of GROUP_SIZE_M. The
    row-major form is always a bijection; it only loses L2 reuse."""

    id = "grouped_ordering"
    family = 12
    tag = "M"
    cost = 2
    conditions = ("divisible_by_block",)
    intent = "swizzle program ids into groups of tile-rows for L2 reuse of A and B panels"
    forward_rank = 2

    def sites(self, source: str) -> list[Site]:
        try:
            _, found = _find(source, match_grouped)
        except cst.ParserSyntaxError:
            return []
        out = []
        for index, (block, i, params, name, line) in enumerate(found):
            before = "\n".join(node_code(s) for s in block.body[i : i + 6])
            after = ROW_MAJOR.format(**params).rstrip("\n")
            role_names = {k: v for k, v in params.items() if k not in ("pid", "num_pid_n", "pid_m", "pid_n")}
            out.append(Site(self.id, name, index, line, before, after, role_names))
        return out

    def simplify(self, source: str, site: Site) -> str:
        module, found = _find(source, match_grouped)
        block, i, params, _, _ = found[site.index]
        # Keep the blank lines before the group, not its comments.
        leading = [ln for ln in block.body[i].leading_lines if ln.comment is None]
        body = [*block.body[:i], *_statements(ROW_MAJOR.format(**params), leading), *block.body[i + 6 :]]
        return module.deep_replace(block, block.with_changes(body=body)).code

    def optimize_sites(self, source: str) -> list[Site]:
        try:
            _, found = _find(source, match_row_major)
        except cst.ParserSyntaxError:
            return []
        out = []
        for index, (block, i, context, name, line) in enumerate(found):
            before = "\n".join(node_code(s) for s in block.body[i : i + 2])
            after = GROUPED.format(**{**DEFAULTS, **context}).rstrip("\n")
            out.append(Site(self.id, name, index, line, before, after, context))
        return out

    def optimize(self, source: str, site: Site, params: dict) -> str:
        module, found = _find(source, match_row_major)
        block, i, context, _, _ = found[site.index]
        values = {**DEFAULTS, **context, **params}
        fn = _enclosing(module, block)
        used = _names(fn.body) if fn is not None else Counter()
        if any(used[values[k]] for k in INTERMEDIATES):
            raise ValueError("the grouped mapping's intermediate names are already used in the kernel")
        leading = list(block.body[i].leading_lines)
        code = GROUPED.format(**values)
        if "num_pid_m_from" in context:  # the kernel counted only its column tiles: count the rows first
            code = f"{context['num_pid_m']} = {context['num_pid_m_from']}\n" + code
        body = [*block.body[:i], *_statements(code, leading), *block.body[i + 2 :]]
        return module.deep_replace(block, block.with_changes(body=body)).code


def _enclosing(module: cst.Module, block: cst.IndentedBlock) -> cst.FunctionDef | None:
    found = []

    class V(cst.CSTVisitor):
        stack: list = []

        def visit_FunctionDef(self, node):
            self.stack.append(node)

        def leave_FunctionDef(self, node):
            self.stack.pop()

        def visit_IndentedBlock(self, node):
            if node is block and self.stack:
                found.append(self.stack[-1])

    module.visit(V())
    return found[0] if found else None
