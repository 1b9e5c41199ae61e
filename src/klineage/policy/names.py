"""What untrusted source may name: the import allow-list, the builtins it may use, and how a dotted name on an
allowed module is resolved (against the real torch and triton the judge's caller has imported anyway: `versions()`
imports both for the cache key).

Resolution is what makes an allow-list of modules hold: torch and triton import stdlib modules at their top level
(`torch.os`, `torch.sys`, `torch.ctypes`, `torch.importlib`, `triton.language.core.builtins` all exist), so an
allowed root reaches a banned module by attribute. Every dotted chain on an allowed module is walked segment by
segment while it names modules; a chain that reaches a module outside the allowed trees, a denied subtree or a
denied function is refused."""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
from pathlib import Path
from types import ModuleType

# Modules whose every public, non-denied name and submodule an untrusted program may use: the kernel language and
# the framework the workloads are written in.
ALLOWED_TREES = ("torch", "triton", "math")

# Other modules, each for a stated reason, with the only names they may give.
NAMED = {
    # type hints in signatures (models write them); not get_type_hints or ForwardRef, which evaluate strings
    "typing": frozenset(
        {"Any", "Callable", "Dict", "List", "Optional", "Sequence", "Tuple", "Union", "Iterable", "Literal"}
    ),
    # caching and wrapping of host helpers (Liger's modules use lru_cache and wraps); reduce/partial take only
    # what the program can already name
    "functools": frozenset({"partial", "lru_cache", "cache", "wraps", "reduce"}),
    # comparisons and arithmetic as functions (Liger's version checks: operator.ge); attrgetter and methodcaller
    # are attribute access by computed name, so they are not here
    "operator": frozenset(
        {"add", "sub", "mul", "truediv", "floordiv", "mod", "neg", "eq", "ne", "lt", "le", "gt", "ge", "itemgetter"}
    ),
    # a record for a kernel's configuration; dataclass builds its __init__ with exec from field names that are
    # identifiers of this source, never from the program's strings
    "dataclasses": frozenset({"dataclass", "field"}),
    # lists of autotune configs (product of block sizes and warps); iterators over what the program already holds
    "itertools": frozenset({"product", "chain", "repeat", "islice", "zip_longest"}),
    "__future__": frozenset({"annotations"}),
}

# Installed packages of Triton kernels whose unmodified modules a program may call into, by name: a public function
# or class defined in that module's own source (never a module object, never a re-exported import, which would
# hand over e.g. `liger_kernel.ops.utils.importlib`). The bundled Liger wrappers call these.
KERNEL_PACKAGES = ("liger_kernel.ops",)  # Liger's kernels and their autograd functions, not its model patching


def kernel_package(module: str) -> bool:
    return any(module == k or module.startswith(k + ".") for k in KERNEL_PACKAGES)


# Subtrees of the allowed modules that escape the judge: compilers and code loaders (torch.compile's inductor,
# cpp_extension.load_inline, jit, library, triton.compile), pickle (load/save, hub, package), processes and threads
# (multiprocessing, distributed, futures), the dispatch machinery itself (overrides, utils._python_dispatch, fx),
# global switches (backends), CUDA graphs (a replay runs kernels no dispatch sees), file IO (cuda.gds, tunable).
DENIED_TREES = (
    "torch.utils",
    "torch.jit",
    "torch.library",
    "torch.compiler",
    "torch.export",
    "torch.fx",
    "torch.hub",
    "torch.package",
    "torch.serialization",
    "torch.storage",
    "torch.multiprocessing",
    "torch.distributed",
    "torch.futures",
    "torch.overrides",
    "torch.func",
    "torch.backends",
    "torch.profiler",
    "torch.testing",
    "torch.cpp",
    "torch.classes",
    "torch.accelerator",
    "torch.onnx",  # exports write files
    "torch.contrib",
    "torch.nativert",
    "torch.numa",  # binds the process to NUMA nodes
    "torch.monitor",
    "torch.ao",  # quantization's converters trace with fx
    "torch.quantization",
    "torch.nn.parallel",  # parallel_apply runs modules on threads
    "torch.autograd.graph",
    "torch.autograd.profiler",
    "torch.cuda.graphs",
    "torch.cuda.jiterator",
    "torch.cuda.memory",
    "torch.cuda.gds",
    "torch.cuda.tunable",
    "torch.cuda.profiler",
    "torch.cuda.green_contexts",
    "torch.cuda.nccl",
    "triton.runtime",
    "triton.compiler",
    "triton.backends",
    "triton.testing",
    "triton.knobs",
    "triton.tools",
    "triton.profiler",  # proton writes files and hooks launches
    "triton.experimental",  # gluon's kernels: a second kernel language the launch trace was not built for
)
ALLOWED_IN_DENIED = ("triton.tools.tensor_descriptor",)  # TensorDescriptor: the host side of TMA (attention expert)

DENIED_NAMES = {
    "torch.compile": "compiles PyTorch code to kernels the launch trace does not see",
    "torch.ops": "calls operators by name",
    "torch.load": "unpickles",
    "torch.save": "pickles",
    "torch.from_numpy": "builds a tensor from numpy data",
    "torch.frombuffer": "builds a tensor from host memory",
    "torch.from_file": "builds a tensor from a file",
    "torch.from_dlpack": "builds a tensor from foreign memory",
    "torch.vmap": "a functorch transform",
    "torch.cuda.CUDAGraph": "a graph replay runs kernels no dispatch sees",
    "torch.cuda.graph": "a graph replay runs kernels no dispatch sees",
    "torch.cuda.make_graphed_callables": "a graph replay runs kernels no dispatch sees",
    "torch.cuda.caching_allocator_alloc": "raw device memory",
    "torch.cuda.caching_allocator_delete": "raw device memory",
    "torch.cuda.cudart": "the CUDA runtime's raw API",
    # also refused as a torch.set_* name; named for its reason: the judge caps the candidate's device memory
    "torch.cuda.set_per_process_memory_fraction": "lifts the candidate's device-memory cap",
    "torch.autograd.grad": "runs autograd's engine (its own threads)",
    "torch.autograd.backward": "runs autograd's engine (its own threads)",
    "triton.compile": "compiles and loads a kernel outside the launch trace",
    "triton.JITFunction": "builds kernels outside the program's source",
    "triton.KernelInterface": "builds kernels outside the program's source",
    "triton.MockTensor": "a harness type",
    "triton.AsyncCompileMode": "compiles on other threads",
    "triton.FutureKernel": "compiles on other threads",
}
DENIED_PREFIXES = {"set_": "changes global state", "use_": "changes global state"}  # torch.set_*, torch.use_*

# Builtins a program may name. Everything else is refused: eval, exec, compile, __import__, getattr and friends by
# computed name, vars, globals, locals, dir, open, input, breakpoint, help, memoryview, type, exit, quit.
SAFE_BUILTINS = frozenset(
    {
        "abs", "all", "any", "bool", "callable", "chr", "classmethod", "dict", "divmod", "enumerate", "filter",
        "float", "frozenset", "hash", "id", "int", "isinstance", "issubclass", "iter", "len", "list", "map", "max",
        "min", "next", "object", "ord", "pow", "print", "property", "range", "repr", "reversed", "round", "set",
        "slice", "sorted", "staticmethod", "str", "sum", "super", "tuple", "zip", "True", "False", "None",
        "NotImplemented", "Ellipsis", "Exception", "ValueError", "TypeError", "RuntimeError", "KeyError",
        "IndexError", "AssertionError", "NotImplementedError", "AttributeError", "ImportError",
        "ModuleNotFoundError", "ZeroDivisionError", "ArithmeticError", "OverflowError", "StopIteration",
        "Warning", "UserWarning",
    }
)  # fmt: skip
LITERAL_NAME_BUILTINS = frozenset({"getattr", "hasattr"})  # allowed with a literal, public attribute name only

# Tensor methods that hand its data to the host or to Python (`policy.flow` refuses them in every function of an
# untrusted module, and `getattr(x, "tolist")` as well).
HOST_METHODS = {
    "tolist": "copies tensor data into Python",
    "item": "reads a tensor element into Python",
    "numpy": "hands tensor data to numpy",
    "cpu": "copies tensor data to the host",
    "storage": "raw storage access",
    "untyped_storage": "raw storage access",
    "pin_memory": "a host copy",
    "share_memory_": "shares tensor memory with other processes",
    "backward": "runs autograd's engine",
    "apply_": "runs a Python callable on every element",
    "map_": "runs a Python callable on every element",
    "map2_": "runs a Python callable on every element",
    "__array__": "hands tensor data to numpy",
}
# Builtins that read a tensor's value into a Python scalar or string when given one.
SCALAR_SINKS = frozenset(
    {"float", "int", "bool", "complex", "round", "range", "str", "repr", "hex", "oct", "chr", "hash"}
)


SAFE_DUNDERS = frozenset({"__init__", "__name__"})  # super().__init__(), fn.__name__
SAFE_DUNDER_NAMES = frozenset({"__name__", "__all__"})

# Attributes of frames, generators, coroutines, tracebacks and code objects: a walk from any of them reaches the
# judge's frames and their locals (the float64 reference) without a name starting with an underscore.
FRAME_ATTRIBUTES = frozenset(
    {
        "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "ag_frame", "ag_code",
        "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "f_trace", "tb_frame", "tb_next",
        "co_code", "co_consts", "co_names", "func_globals",
    }
)  # fmt: skip


# Hooks Triton calls inside a launch, where the dispatch ban is lifted for Triton's own work: a function hung there
# computes with PyTorch unseen (tests/adversarial/programs/pre_run_hook_compute.py). Autotune's pre_hook/post_hook
# are judged as launch callbacks instead (rule launch_callback).
LAUNCH_HOOK_ATTRIBUTES = frozenset({"add_pre_run_hook", "pre_run_hooks", "launch_enter_hook", "launch_exit_hook"})


def allowed_tree(name: str) -> bool:
    """A module name inside an allowed tree and outside the denied subtrees."""
    if not any(name == root or name.startswith(root + ".") for root in ALLOWED_TREES):
        return False
    if any(name == ok or name.startswith(ok + ".") for ok in ALLOWED_IN_DENIED):
        return True
    return not any(name == bad or name.startswith(bad + ".") for bad in DENIED_TREES)


def passable(name: str) -> bool:
    """A denied module on the way to an allowed one (`triton.tools` to `triton.tools.tensor_descriptor`): it may be
    named in a longer chain, never used itself."""
    return any(ok.startswith(name + ".") for ok in ALLOWED_IN_DENIED)


def denied_name(path: str) -> str | None:
    """Why a dotted name inside an allowed tree is refused, or None."""
    if path in DENIED_NAMES:
        return DENIED_NAMES[path]
    parent = path.rsplit(".", 1)[0]
    if "." in path and not allowed_tree(parent) and not passable(parent):
        return "inside a denied module"
    last = path.rsplit(".", 1)[-1]
    if path.startswith("torch."):
        for prefix, why in DENIED_PREFIXES.items():
            if last.startswith(prefix):
                return why
        if last.endswith("Storage"):
            return "raw storage"
    return None


class Resolved:
    """What a dotted chain on an allowed module names: `problem` (why it is refused) or where it ended."""

    def __init__(self, path: str, is_module: bool, problem: str | None = None, obj: object = None):
        self.path, self.is_module, self.problem, self.obj = path, is_module, problem, obj


def _submodule(path: str) -> ModuleType | None:
    try:
        return importlib.import_module(path)
    except Exception:  # not a submodule, or one that does not import here: refused by the caller
        return None


def resolve(root: str, segments: list[str]) -> Resolved:
    """Walk `root.seg1.seg2...` (root: an allowed module's dotted name) while it names modules. A segment after a
    non-module object is an attribute of that object, checked by the attribute rules, not here."""
    module = sys.modules.get(root) or _submodule(root)
    if module is None or not allowed_tree(root) and root not in NAMED:
        return Resolved(root, False, f"module {root} is not allowed")
    obj, path = module, root
    for i, seg in enumerate(segments):
        if not isinstance(obj, ModuleType):
            break
        if root in NAMED:
            if seg not in NAMED[root]:
                return Resolved(f"{path}.{seg}", False, f"{root}.{seg} is not among the names allowed from {root}")
            return Resolved(f"{path}.{seg}", False, None, None)
        full = f"{path}.{seg}"
        if seg.startswith("_"):
            return Resolved(full, False, f"private name {full}")
        if why := denied_name(full):
            return Resolved(full, False, f"{full}: {why}")
        child = getattr(obj, seg, None)
        if child is None:
            child = _submodule(full)
        if isinstance(child, ModuleType) and not allowed_tree(child.__name__):
            if not (child.__name__ == full and passable(full) and i < len(segments) - 1):
                return Resolved(full, True, f"{full} is the module {child.__name__}, which is not allowed")
        obj, path = child, full
    return Resolved(path, isinstance(obj, ModuleType), None, obj)


def installed_source(dotted: str) -> str | None:
    """The source of an installed module, found without importing it or its packages (no installed code runs)."""
    parts = dotted.split(".")
    try:
        spec = importlib.machinery.PathFinder.find_spec(parts[0])
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if len(parts) == 1:
        return Path(spec.origin).read_text() if spec.origin and spec.origin.endswith(".py") else None
    for location in spec.submodule_search_locations or []:
        base = Path(location, *parts[1:])
        for file in (base.with_suffix(".py"), base / "__init__.py"):
            if file.is_file():
                return file.read_text()
    return None


def top_level_kind(source: str, name: str) -> str | None:
    """How `name` is bound at the top level of `source`: "def" (function, class, assignment of a computed value),
    "alias" (assignment of another name, `f = os.system`), "from module:name" for `from module import name`,
    "module" for an import of a module, None when it is not bound there."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    found = None
    for node in tree.body:
        for inner in [node, *(getattr(node, "body", []) if isinstance(node, (ast.If, ast.Try)) else [])]:
            if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and inner.name == name:
                found = "def"
            elif isinstance(inner, (ast.Assign, ast.AnnAssign)):
                targets = inner.targets if isinstance(inner, ast.Assign) else [inner.target]
                if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                    # `f = importlib.import_module`: another object under this module's name, not a definition
                    aliased = isinstance(inner.value, (ast.Name, ast.Attribute))
                    found = "alias" if aliased else "def"
            elif isinstance(inner, ast.ImportFrom) and inner.level == 0:
                for alias in inner.names:
                    if (alias.asname or alias.name) == name:
                        found = f"from {inner.module}:{alias.name}"
            elif isinstance(inner, ast.Import):
                for alias in inner.names:
                    if (alias.asname or alias.name.split(".")[0]) == name:
                        found = "module"
    return found
