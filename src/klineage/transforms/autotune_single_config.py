"""Family 10: @triton.autotune over a config list, against one config passed at launch."""

from __future__ import annotations

import re

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from klineage import launch_config
from klineage.launch_config import expert_tiles
from klineage.transform import (
    WHOLE_CONFIGS,
    Site,
    Transform,
    constexpr_params,
    decorator_name,
    dotted,
    is_kernel,
    launched_kernel,
    node_code,
    register,
)
from klineage.transforms.launch_knobs import append_kwargs, drop_trailing, trailing_kwargs

AUTOTUNE = ("triton.autotune", "autotune")
CONFIG = ("triton.Config", "Config")
HEURISTICS = ("triton.heuristics", "heuristics")
# Config keywords that a launch accepts as well (the rest, pre_hook, maxnreg, ..., have no launch equivalent).
LAUNCH_KEYWORDS = ("num_warps", "num_stages", "num_ctas")


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def call_arg(call: cst.Call, name: str, position: int) -> cst.Arg | None:
    for i, a in enumerate(call.args):
        if (a.keyword is not None and a.keyword.value == name) or (a.keyword is None and not a.star and i == position):
            return a
    return None


def _helper_list(name: str, module: cst.Module) -> cst.List | None:
    """The list a module-level, argument-free helper returns as its only statement (`def _configs(): return [...]`)."""
    for stmt in module.body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == name:
            p = stmt.params
            if p.params or p.posonly_params or p.kwonly_params or p.star_kwarg or isinstance(p.star_arg, cst.Param):
                return None
            if not isinstance(stmt.body, cst.IndentedBlock):
                return None
            body = [s for s in stmt.body.body if not _is_docstring(s)]
            if len(body) == 1 and isinstance(body[0], cst.SimpleStatementLine) and len(body[0].body) == 1:
                ret = body[0].body[0]
                if isinstance(ret, cst.Return) and isinstance(ret.value, cst.List):
                    return ret.value
            return None
    return None


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, cst.SimpleString | cst.ConcatenatedString)
    )


# Most configs one comprehension may expand to: FLA's chunked cumsum tunes 4 x 3 x 4 = 48.
MAX_EXPANDED = 256


def _module_value(name: str, module: cst.Module) -> cst.BaseExpression | None:
    """The value of the module-level assignment `name = ...` (the last one), or None."""
    found = None
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if (
                    isinstance(small, cst.Assign)
                    and len(small.targets) == 1
                    and isinstance(small.targets[0].target, cst.Name)
                    and small.targets[0].target.value == name
                ):
                    found = small.value
    return found


def _literal_values(expr: cst.BaseExpression, module: cst.Module, depth: int = 0) -> list[cst.BaseExpression] | None:
    """The elements of a literal list or tuple, of a module-level name bound to one, or of `A if C else B` over two
    such lists: then the elements both hold, in A's order (FLA's `NUM_WARPS_AUTOTUNE = [1, .., 16] if IS_AMD else
    [1, .., 32]`: the configs valid on every platform the expert tunes for). None otherwise."""
    if depth > 4:
        return None
    if isinstance(expr, cst.Name):
        value = _module_value(expr.value, module)
        return _literal_values(value, module, depth + 1) if value is not None else None
    if isinstance(expr, cst.IfExp):
        a, b = _literal_values(expr.body, module, depth + 1), _literal_values(expr.orelse, module, depth + 1)
        if a is None or b is None:
            return None
        other = {_code(v) for v in b}
        common = [v for v in a if _code(v) in other]
        return common or None
    if isinstance(expr, cst.List | cst.Tuple) and expr.elements:
        if not all(isinstance(e, cst.Element) for e in expr.elements):
            return None
        return [e.value for e in expr.elements]
    return None


class _Bind(cst.CSTTransformer):
    """Replace the comprehension's loop variables by values; keyword names (`num_warps=num_warps`) stay."""

    def __init__(self, values: dict[str, cst.BaseExpression]):
        super().__init__()
        self.values = values

    def leave_Name(self, original_node, updated_node):
        return self.values.get(original_node.value, updated_node)

    def leave_Arg(self, original_node, updated_node):
        return updated_node.with_changes(keyword=original_node.keyword)


def _expanded(comp: cst.ListComp, module: cst.Module) -> list[cst.Call] | None:
    """The configs a comprehension `[triton.Config(...) for a in A for b in B]` makes, in its order, where every
    iterable is literal (`_literal_values`) and no clause filters; None otherwise."""
    if not isinstance(comp.elt, cst.Call) or dotted(comp.elt.func) not in CONFIG:
        return None
    loops: list[tuple[str, list[cst.BaseExpression]]] = []
    clause = comp.for_in
    while clause is not None:
        if clause.ifs or clause.asynchronous or not isinstance(clause.target, cst.Name):
            return None
        values = _literal_values(clause.iter, module)
        if values is None:
            return None
        loops.append((clause.target.value, values))
        clause = clause.inner_for_in
    combos: list[dict[str, cst.BaseExpression]] = [{}]
    for name, values in loops:
        combos = [{**c, name: v} for c in combos for v in values]
        if len(combos) > MAX_EXPANDED:
            return None
    return [comp.elt.visit(_Bind(c)) for c in combos]


def config_list(expr: cst.BaseExpression, module: cst.Module) -> list[cst.Call] | None:
    """The triton.Config calls of a literal list, of the literal list a trivial helper returns, or of a comprehension
    over literal lists (expanded: `_expanded`); None otherwise (concatenations, lists built at run time)."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and not expr.args:
        expr = _helper_list(expr.func.value, module)
    if isinstance(expr, cst.ListComp):
        return _expanded(expr, module)
    if not isinstance(expr, cst.List) or not expr.elements:
        return None
    calls = []
    for element in expr.elements:
        if not isinstance(element, cst.Element) or not isinstance(element.value, cst.Call):
            return None
        if dotted(element.value.func) not in CONFIG:
            return None
        calls.append(element.value)
    return calls


def config_launch_kwargs(config: cst.Call) -> dict[str, str] | None:
    """What a launch must pass to run exactly this config: its meta-parameters, then num_warps/num_stages/num_ctas,
    as source text, in the config's order. None when the config has anything a launch cannot express."""
    out: dict[str, str] = {}
    for i, a in enumerate(config.args):
        if a.star:
            return None
        if (a.keyword is None and i == 0) or (a.keyword is not None and a.keyword.value == "kwargs"):
            if not isinstance(a.value, cst.Dict):
                return None
            for element in a.value.elements:
                if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
                    return None
                key = element.key.evaluated_value
                if not isinstance(key, str) or not key.isidentifier() or key in out:
                    return None
                out[key] = _code(element.value)
        elif a.keyword is not None and a.keyword.value in LAUNCH_KEYWORDS:
            out[a.keyword.value] = _code(a.value)
        else:  # a positional knob, pre_hook, maxnreg, ir_override: skip the site
            return None
    return out or None


class _Launches(cst.CSTTransformer):
    """Collects (and, with `rewrite`, rewrites) the launches of one kernel; counts every other use of its name."""

    def __init__(self, kernel: str, rewrite=None):
        super().__init__()
        self.kernel, self.rewrite = kernel, rewrite
        self.launches: list[cst.Call] = []
        self.names = 0
        self.skip: set[int] = set()

    def visit_FunctionDef(self, node):
        self.skip.add(id(node.name))

    def visit_Call(self, node):
        if launched_kernel(node, {self.kernel}) is not None:
            self.launches.append(node)

    def visit_Name(self, node):
        if node.value == self.kernel and id(node) not in self.skip:
            self.names += 1

    def leave_Call(self, original_node, updated_node):
        if self.rewrite is not None and launched_kernel(original_node, {self.kernel}) is not None:
            return self.rewrite(updated_node)
        return updated_node


def is_autotuner(decorator: cst.Decorator) -> bool:
    """An autotuning decorator: Triton's by name, or any call given both `configs=` and `key=` (an Autotuner of a
    library's own: FlagGems's `@libtuner(configs=runtime.get_tuned_config("gated_activation"), key=["M", "N"])`,
    on 4 of its 6 fused experts; issue 31 found no transform covering it)."""
    if decorator_name(decorator) in AUTOTUNE:
        return True
    call = decorator.decorator
    keywords = {a.keyword.value for a in call.args if a.keyword is not None} if isinstance(call, cst.Call) else set()
    return {"configs", "key"} <= keywords


def _autotune_at(fn: cst.FunctionDef) -> int | None:
    """Where the kernel's autotune decorator is, the outermost autotuner above its @triton.jit. Above it may stand
    `@triton.heuristics` (FLA stacks `@triton.heuristics({'IS_VARLEN': ...})` over its autotune; the heuristics then
    wrap the plain kernel) or another wrapper (`_wrapped`: FlagGems's `@libentry()`)."""
    for i, d in enumerate(fn.decorators):
        if is_autotuner(d):
            return i
        if decorator_name(d) in ("triton.jit", "jit"):
            return None
    return None


def _wrapped(fn: cst.FunctionDef, at: int) -> bool:
    """Whether a decorator other than heuristics stands above the autotuner: that wrapper may read the autotuner
    object (FlagGems's libentry asks `fn.best_config`), so the simple form keeps the autotuner over one config."""
    return any(decorator_name(d) not in HEURISTICS for d in fn.decorators[:at])


def _one_config(fn: cst.FunctionDef, module: cst.Module) -> cst.Decorator | None:
    """The kernel's autotune decorator where it tunes over one config: a literal list of one triton.Config, or any
    list cut to its first (`EXPR[:1]`, the simple form of a list built at run time)."""
    at = _autotune_at(fn)
    if at is None or not isinstance(fn.decorators[at].decorator, cst.Call):
        return None
    decorator = fn.decorators[at]
    configs = call_arg(decorator.decorator, "configs", 0)
    if configs is not None and first_only(configs.value) is not None:
        return decorator
    calls = config_list(configs.value, module) if configs is not None else None
    return decorator if calls is not None and len(calls) == 1 else None


def first_only(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """The list `expr` cuts to its first element (`LIST[:1]`), or None."""
    if not isinstance(expr, cst.Subscript) or len(expr.slice) != 1:
        return None
    part = expr.slice[0].slice
    if not isinstance(part, cst.Slice) or part.lower is not None or part.step is not None:
        return None
    return expr.value if isinstance(part.upper, cst.Integer) and part.upper.value == "1" else None


def _first_config_only(call: cst.Call, module: cst.Module) -> cst.Call:
    """The autotune call with its config list cut to the first config: written out as a literal list where the list
    is literal, else `EXPR[:1]` (a list built at run time, FlagGems's `runtime.get_tuned_config(...)`: an autotuner
    over one config runs it without benchmarking, whatever the list holds)."""
    configs = call_arg(call, "configs", 0)
    calls = config_list(configs.value, module)
    if calls:
        cut: cst.BaseExpression = cst.List([cst.Element(calls[0])])
    else:
        cut = cst.Subscript(configs.value, [cst.SubscriptElement(cst.Slice(lower=None, upper=cst.Integer("1")))])
    return call.deep_replace(configs, configs.with_changes(value=cut))


def kernel_launches(module: cst.Module, kernel: str) -> list[cst.Call] | None:
    """The launches of `kernel`, or None when its name is also used other than to launch it (a host that reads
    `kernel.best_config` or hands the kernel on relies on the autotuner object)."""
    finder = _Launches(kernel)
    module.visit(finder)
    if not finder.launches or finder.names != len(finder.launches):
        return None
    return finder.launches


@register
class AutotuneSingleConfig(Transform):
    """Intent: @triton.autotune benchmarks a list of configs per distinct value of `key` and launches the fastest,
    so one kernel serves every shape with a good tile, warp count and pipeline depth.

    Expert form: `@triton.autotune(configs=[triton.Config({...}, num_warps=.., num_stages=..), ...], key=[...])` as
    the outermost decorator of a kernel, the configs a literal list (or the literal list that an argument-free
    helper returns: `configs=_configs()`). Simple form: no autotune; every launch of the kernel in the same source
    passes the FIRST config's meta-parameters and knobs as trailing keyword arguments (a host change). Params:
    the config list and key as source text, any other decorator arguments (reset_to_zero, restore_value,
    prune_configs_by, ...) as source text, and `decorator` (the whole decorator, so optimize restores it verbatim).
    Where the first config carries what a launch cannot pass (a pre_hook, maxnreg), the simple form keeps the
    decorator with that config alone (an autotuner over one config runs it without benchmarking): the attention
    expert's configs set its K/V descriptors' box in a pre_hook, and without this form its tiles (128x128 and
    128x64 at 8 warps) were in no skill, so the naive attention's tiles were searched one doubling at a time.
    A config list built by a comprehension over literal lists (FLA's `[triton.Config({'BT': BT}, num_warps=w) for
    BT in [16, 32] for w in [2, 4]]`, its lists literal, bound to module-level names, or `A if C else B` of two
    such lists, whose common elements count) is expanded in its order: its first config is the simple form's.
    A config list built at run time (FlagGems' `runtime.get_tuned_config(...)`), an autotuner under another wrapper
    (FlagGems's `@libentry()`, which reads the autotuner's best config) and a library's own autotuner (any decorator
    given `configs=` and `key=`: FlagGems's `@libtuner`) keep the decorator over the first config alone
    (`configs=EXPR[:1]`); the redo restores the decorator verbatim. Skipped: kernels whose name is used other than
    to launch it, kernels never launched here, launches that already pass a config key.

    Conditions: autotuning runs the kernel several times on the same buffers while it benchmarks, so a launch must
    be idempotent (idempotent_launch). A kernel that accumulates (atomic_add into an output, `+=` into a buffer
    it does not first overwrite) or writes in place needs `reset_to_zero=[...]` / `restore_value=[...]` in the
    decorator; simplify records them in params and optimize puts them back. Every config must also be correct on
    every shape (the kernel masks every tile edge) and the grid must read the block sizes from META
    (`grid = lambda META: ...`), not from host variables.

    Failure: re-adding autotune on an accumulating kernel without reset_to_zero makes the benchmark runs add up:
    outputs are multiplied by the number of trials (corrupt results, only on the first launch of each key). A grid
    computed from a host-side block size launches the wrong number of programs for other configs (missing or
    out-of-range tiles). The simplified program is always correct; it runs one config on every shape (slower)."""

    id = "autotune_single_config"
    family = 10
    tag = "M"
    cost = 2
    conditions = ("idempotent_launch",)
    intent = "pick the tile/warps/stages per shape by benchmarking a config list instead of one fixed config"
    forward_rank = 1
    launch_configuration = WHOLE_CONFIGS
    needs_timing = True
    tuned_to_kernel = True

    # -- the forward walk's hooks ---------------------------------------------------------------------------

    def carry(self, expert: dict, source: str, site: Site) -> dict | None:
        """The expert's configs, renamed onto this kernel's launch."""
        return autotune_params(source, site.function, expert_tiles(expert))

    def blind_params(self, source: str, site: Site) -> dict | None:
        """Without an expert's configs: the current config plus every tile doubled and 8 warps."""
        current = {t.keyword: t.value for t in launch_config.tunables(source) if t.kernel == site.function}
        doubled = {k: v * 2 for k, v in current.items() if k not in launch_config.KNOBS}
        return autotune_params(source, site.function, [doubled, {"num_warps": 8}, {**doubled, "num_warps": 8}])

    def variants(self, carried: dict, source: str, kernel: str | None, launches: list[dict] | None) -> list[dict]:
        """The config list as carried: it is its own neighbourhood."""
        return [carried] if carried else []

    def host_side(self, before: str, after: str, site: Site) -> str:
        """The configs now own the tiles: size the grid from them (`META`)."""
        host_tiles = {
            t.name: t.keyword
            for t in launch_config.tunables(before)
            if t.kernel == site.function and t.bound == "assigned" and t.keyword not in launch_config.KNOBS
        }
        return launch_config.meta_grid(after, site.function, host_tiles)

    # -- analysis -------------------------------------------------------------------------------------------

    def _expert_sites(self, module: cst.Module):
        """(kernel FunctionDef, decorator, params, launch kwargs, launches) for each simplifiable kernel."""
        for stmt in module.body:
            if not isinstance(stmt, cst.FunctionDef) or not stmt.decorators:
                continue
            at = _autotune_at(stmt)
            if at is None:
                continue
            decorator = stmt.decorators[at]
            if not isinstance(decorator.decorator, cst.Call):
                continue
            if not any(decorator_name(d) in ("triton.jit", "jit") for d in stmt.decorators[at + 1 :]):
                continue
            call = decorator.decorator
            configs, key = call_arg(call, "configs", 0), call_arg(call, "key", 1)
            if configs is None or key is None:
                continue
            if first_only(configs.value) is not None:
                continue  # already the simple form
            calls = config_list(configs.value, module)
            kwargs = config_launch_kwargs(calls[0]) if calls else None
            launches = kernel_launches(module, stmt.name.value)
            if calls is None or _wrapped(stmt, at) or decorator_name(decorator) not in AUTOTUNE:
                # a list built at run time, an autotuner under a wrapper that may read it, or a library's own
                # autotuner (its other behaviour is its own): the first config alone, kept in the decorator
                launches = None
            elif kwargs is None and len(calls) > 1:
                launches = None  # the first config alone, kept in the decorator (its pre_hook runs there)
            elif kwargs is None or launches is None:
                continue
            elif any(a.keyword is not None and a.keyword.value in kwargs for c in launches for a in c.args):
                continue
            params = {"configs": _code(configs.value), "key": _code(key.value)}
            for a in call.args:
                if a.keyword is not None and a.keyword.value not in ("configs", "key"):
                    params[a.keyword.value] = _code(a.value)
            params["decorator"] = _code(call)
            # the redo puts it back there (FLA's order; the matmul expert's autotune wraps its heuristics)
            if at > 0 and not _wrapped(stmt, at):
                params["placement"] = "under_heuristics"
            # the configs themselves, also when a helper returns them: what a forward walk carries to other kernels
            # (none from a list built at run time: what it holds is known only where it runs)
            if calls:
                params["config_list"] = "[" + ", ".join(_code(c) for c in calls) + "]"
            yield stmt, decorator, params, kwargs, launches

    def _plain_sites(self, module: cst.Module):
        """(kernel, launches, None) for a kernel without autotune whose every launch passes keywords, and (kernel,
        None, decorator) for one autotuned over a single config: the two simple forms."""
        for stmt in module.body:
            if not isinstance(stmt, cst.FunctionDef) or not is_kernel(stmt):
                continue
            if any(is_autotuner(d) for d in stmt.decorators):
                if (one := _one_config(stmt, module)) is not None:
                    yield stmt, None, one
                continue
            launches = kernel_launches(module, stmt.name.value)
            if launches is None or not all(any(a.keyword is not None for a in c.args) for c in launches):
                continue
            yield stmt, launches, None

    @staticmethod
    def _lines(module: cst.Module):
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        return wrapper.resolve(PositionProvider)

    # -- the four methods ----------------------------------------------------------------------------------

    def sites(self, source: str) -> list[Site]:
        try:
            module = cst.parse_module(source)
        except cst.ParserSyntaxError:
            return []
        positions = self._lines(module)
        out = []
        for i, (fn, decorator, params, kwargs, launches) in enumerate(self._expert_sites(module)):
            if launches is None:  # the first config kept in the decorator
                before = "@" + node_code(decorator.decorator)
                after = "@" + node_code(_first_config_only(decorator.decorator, module))
            else:
                before = "\n".join(["@" + node_code(decorator.decorator)] + [node_code(c) for c in launches])
                after = "\n".join(node_code(append_kwargs(c, kwargs)) for c in launches)
            out.append(Site(self.id, fn.name.value, i, positions[decorator].start.line, before, after, params))
        return out

    def simplify(self, source: str, site: Site) -> str:
        module = cst.parse_module(source)
        for i, (fn, decorator, _, kwargs, launches) in enumerate(self._expert_sites(module)):
            if i != site.index:
                continue
            at = _autotune_at(fn)
            if launches is None:
                one = decorator.with_changes(decorator=_first_config_only(decorator.decorator, module))
                kept = [*fn.decorators[:at], one, *fn.decorators[at + 1 :]]
                return module.deep_replace(fn, fn.with_changes(decorators=kept)).code
            kept = [*fn.decorators[:at], *fn.decorators[at + 1 :]]
            module = module.deep_replace(fn, fn.with_changes(decorators=kept))
            return module.visit(_Launches(fn.name.value, lambda c, kw=kwargs: append_kwargs(c, kw))).code
        raise ValueError(f"no autotune site {site.index}")

    def optimize_sites(self, source: str) -> list[Site]:
        try:
            module = cst.parse_module(source)
        except cst.ParserSyntaxError:
            return []
        positions = self._lines(module)
        out = []
        for i, (fn, launches, one) in enumerate(self._plain_sites(module)):
            if one is not None:
                before = "@" + node_code(one.decorator)
                after = "@triton.autotune(configs=[...], key=[...])"
            else:
                before = "\n".join(node_code(c) for c in launches)
                after = "@triton.autotune(configs=[...], key=[...])\n" + before
            out.append(Site(self.id, fn.name.value, i, positions[fn].start.line, before, after, {}))
        return out

    def optimize(self, source: str, site: Site, params: dict) -> str:
        module = cst.parse_module(source)
        for i, (fn, launches, one) in enumerate(self._plain_sites(module)):
            if i != site.index:
                continue
            decorator = self._decorator(params)
            configs = call_arg(decorator, "configs", 0)
            calls = config_list(configs.value, module) if configs is not None else None
            if one is not None and (calls or "config_list" not in params):
                # the config list back in the decorator, whatever its configs carry (a list built at run time too)
                at = fn.decorators.index(one)
                placed = [*fn.decorators[:at], one.with_changes(decorator=decorator), *fn.decorators[at + 1 :]]
                return module.deep_replace(fn, fn.with_changes(decorators=placed)).code
            kwargs = config_launch_kwargs(calls[0]) if calls and one is None else None
            if kwargs is None:
                raise ValueError(f"configs {params.get('configs')!r}: not a literal list of triton.Config")
            keys = frozenset(kwargs)
            for c in launches:  # every launch passes the first config: exactly those keywords, last
                if trailing_kwargs(c, keys) != len(keys):
                    raise ValueError(f"a launch of {fn.name.value} does not end with {sorted(keys)}")
            # where the expert had it: outermost, or below the kernel's leading @triton.heuristics (_autotune_at)
            lead = 0
            if params.get("placement") == "under_heuristics":
                lead = next((i for i, d in enumerate(fn.decorators) if decorator_name(d) not in HEURISTICS), 0)
            placed = [*fn.decorators[:lead], cst.Decorator(decorator), *fn.decorators[lead:]]
            module = module.deep_replace(fn, fn.with_changes(decorators=placed))
            return module.visit(_Launches(fn.name.value, lambda c, n=len(keys): drop_trailing(c, n))).code
        raise ValueError(f"no optimize site {site.index}")

    @staticmethod
    def _decorator(params: dict) -> cst.Call:
        if "decorator" in params:
            return cst.parse_expression(params["decorator"])
        extra = "".join(
            f", {k}={v}" for k, v in params.items() if k not in ("configs", "key", "decorator", "placement")
        )
        return cst.parse_expression(f"triton.autotune(configs={params['configs']}, key={params['key']}{extra})")


SIZE_PARAM = re.compile(r"^([A-Z]|n_\w+|\w+_size|num_\w+|n\w*)$")


def autotune_params(source: str, kernel: str, tiles: list[dict[str, int]]) -> dict | None:
    """Params for `optimize` on this program: the first config is what the launches pass now (their trailing tile
    and knob keywords), the others that config changed by each of `tiles`; the key is the kernel's size arguments.
    None when the launch's trailing keywords are not all tunable literals, or when no tile changes the present config:
    an autotuner over that one config is the launch as it is. An expert whose list is built at run time (FlagGems's
    `runtime.get_tuned_config(...)`) carries no tiles, and its x6.22 on weight norm ranked such a no-op first on
    FlagGems's trace (expected x1.58 after the likeness discount; H100 library, RESULTS.md#wild-h100-3)."""
    module = launch_config.parsed(source)
    fn = launch_config.kernel_def(source, kernel)
    if module is None:
        return None
    values = {t.keyword: t.value for t in launch_config.tunables(source) if t.kernel == kernel}
    launches = kernel_launches(module, kernel)
    if fn is None or not values or not launches:
        return None
    launch = launches[0]  # optimize checks that every launch ends with the same keywords
    n = trailing_kwargs(launch, frozenset(values))
    if n == 0:
        return None
    end = len(launch.args) - 1 if launch.args[-1].star == "**" else len(launch.args)
    first = {a.keyword.value: values[a.keyword.value] for a in launch.args[end - n : end]}
    configs = [first]
    for tile in tiles:
        config = {**first, **{k: v for k, v in tile.items() if k in first or k in launch_config.KNOBS}}
        if config not in configs:
            configs.append(config)
    if len(configs) < 2:
        return None
    params = [p.name.value for p in fn.params.params]
    constexpr = constexpr_params(fn)
    key = [p for p in params if p not in constexpr and SIZE_PARAM.match(p) and not p.endswith("_ptr")]

    def config_code(c: dict) -> str:
        meta = ", ".join(f"'{k}': {v}" for k, v in c.items() if k not in launch_config.KNOBS)
        knobs = "".join(f", {k}={v}" for k, v in c.items() if k in launch_config.KNOBS)
        return f"triton.Config({{{meta}}}{knobs})"

    return {"configs": "[" + ", ".join(config_code(c) for c in configs) + "]", "key": repr(key)}
