"""Programs: candidate implementations. A program is a KernelBench candidate file (`class ModelNew`) whose forward
launches Triton kernels, optionally with rewritten copies of other modules (an installed package's kernels, say).

On disk a program is either one `.py` file or a directory holding `program.py` and `modules/<dotted.name>.py`; each
module file replaces the module of that name while the program runs in the sandbox. The installed files are never
touched: `ModuleOverrides` is a meta-path finder placed in front of site-packages for that one process."""

from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import importlib.util
import re
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from klineage.workload import UserError, source_hash


class ProgramError(UserError):
    pass


# Who wrote a program's untrusted modules (`Program.author`): a model (`--materializer llm`, `mine --llm`), an
# agent through `klineage mcp`, or whoever handed a file to `klineage check` without `--trusted`.
AUTHORS = ("model", "agent", "unchecked")


@dataclass(frozen=True)
class Program:
    """Source of a candidate: the main file plus module overrides (dotted name -> source).

    Trust is by provenance: the user's own starting program, an installed package's modules and the mechanical
    rewrites of either (`with_source`, `with_module` keep what they are given) are trusted; the modules named in
    `untrusted` were written by `author` (one of AUTHORS), and the static policy (`klineage.policy`) judges them
    before anything of the program runs. Trust is not part of the hash: the same source is the same program, and
    the policy runs in front of the verdict cache."""

    name: str
    source: str
    modules: dict[str, str] = field(default_factory=dict, hash=False)
    path: Path | None = None
    untrusted: frozenset[str] = field(default=frozenset(), compare=False)
    author: str = field(default="", compare=False)
    base: dict[str, str] = field(default_factory=dict, hash=False, compare=False)  # trusted text before a rewrite

    @property
    def hash(self) -> str:
        return source_hash(self.source, *(f"{k}\n{v}" for k, v in sorted(self.modules.items())))

    @property
    def trusted(self) -> bool:
        return not self.untrusted

    def written_by(self, author: str, modules: set[str] | None = None) -> Program:
        """The program with `modules` (every module by default: "program" and each override) marked as written by
        `author`; what was untrusted stays untrusted."""
        if author not in AUTHORS:
            raise ValueError(f"unknown author {author!r}; known: {', '.join(AUTHORS)}")
        named = {m for m, _ in self.module_sources()} if modules is None else set(modules)
        return replace(self, untrusted=self.untrusted | named, author=author)

    def rewritten_by(self, author: str, module: str, source: str) -> Program:
        """The program with `module` ("program" or an override) replaced by what `author` wrote. Where the module was
        trusted, its text before is kept in `base`: the policy refuses only what the author changed, so a model's
        rewrite of a kernel inside an installed module is not refused for the module's own imports."""
        before = dict(self.module_sources()).get(module)
        keep = module in self.untrusted or before is None
        base = self.base if keep else {**self.base, module: before}
        return replace(self.with_source(module, source).written_by(author, {module}), base=base)

    def with_module(self, dotted: str, source: str) -> Program:
        return replace(self, modules={**self.modules, dotted: source})

    def module_sources(self) -> list[tuple[str, str]]:
        """(module, source) for the main file ("program") and each override module, in a fixed order."""
        return [("program", self.source), *sorted(self.modules.items())]

    def with_source(self, module: str, source: str) -> Program:
        """The program with one module's source ("program" for the main file) replaced."""
        if module == "program":
            return replace(self, source=source)
        return self.with_module(module, source)

    def write(self, directory: Path) -> Path:
        """Materialize as a directory program; returns the main file. Files must exist on disk because Triton reads
        kernel source through `inspect`."""
        directory.mkdir(parents=True, exist_ok=True)
        main = directory / "program.py"
        main.write_text(self.source)
        if self.modules:
            (directory / "modules").mkdir(exist_ok=True)
            for dotted, source in self.modules.items():
                (directory / "modules" / f"{dotted}.py").write_text(source)
        return main


def load_program(path: str | Path) -> Program:
    """Read a program file or directory; raise `ProgramError` with one line naming the problem."""
    path = Path(path)
    if path.is_dir():
        main = path / "program.py"
        if not main.is_file():
            raise ProgramError(f"program {path}: a program directory needs program.py")
        modules = {p.stem: p.read_text() for p in sorted((path / "modules").glob("*.py"))}
    elif path.is_file():
        main, modules = path, {}
    else:
        raise ProgramError(f"program {path}: no such file or directory")
    program = Program(name=path.stem, source=main.read_text(), modules=modules, path=path.resolve())
    for label, source in [(str(main), program.source), *((f"module {k}", v) for k, v in modules.items())]:
        try:
            tree = ast.parse(source)
        except SyntaxError as e:
            raise ProgramError(f"program {label} does not parse: line {e.lineno}: {e.msg}") from None
        if label == str(main) and not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body):
            raise ProgramError(f"program {main}: defines no class ModelNew")
    return program


def with_installed_modules(program: Program, names: list[str]) -> Program:
    """Carry copies of installed modules (an expert's kernels inside a package) as overrides, so transforms can
    rewrite them. The copies are read now from the installed files, which stay untouched."""
    for name in names:
        found = module_file(name)
        if found is None or found.suffix != ".py":
            raise ProgramError(f"module {name}: not installed as a Python source file")
        program = program.with_module(name, found.read_text())
    return program


def module_file(dotted: str) -> Path | None:
    """The installed source file of module `dotted`; None where it is not installed. A submodule is found from its
    top-level package's location on disk without running any package `__init__` (FlagGems' raises on a machine
    without CUDA: it asks for the device name at import); a top-level module through the import system's finders,
    which import nothing either."""
    head, _, rest = dotted.partition(".")
    try:
        spec = importlib.util.find_spec(head)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if not rest:
        return Path(spec.origin) if spec.origin and Path(spec.origin).is_file() else None
    *parents, leaf = rest.split(".")
    for location in spec.submodule_search_locations or []:
        folder = Path(location, *parents)
        for candidate in (folder / f"{leaf}.py", folder / leaf / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


class ModuleOverrides(importlib.abc.MetaPathFinder):
    """Serve rewritten copies of modules from files instead of the installed ones."""

    def __init__(self, files: dict[str, Path]):
        self.files = files

    def find_spec(self, fullname, path=None, target=None):
        file = self.files.get(fullname)
        if file is not None:
            return importlib.util.spec_from_file_location(fullname, file)
        if any(name.startswith(fullname + ".") for name in self.files):
            # a parent package of an override: the installed one if there is one, else an empty namespace package
            if importlib.machinery.PathFinder.find_spec(fullname, path) is None:
                spec = importlib.machinery.ModuleSpec(fullname, None, is_package=True)
                spec.submodule_search_locations = []
                return spec
        return None


# how many copies of each module this process has imported: a later copy's operators get namespaces of its own
_installed_copies: dict[str, int] = {}


def install(program: Program, workdir: Path | None = None):
    """Import the program in this process (the sandbox child) and return its main module. Its files are written to
    `workdir` (a fresh temporary directory by default), whose frames are then the program's. Overridden modules
    that were already imported are evicted first, so the rewritten copy is what the program's imports bind to.
    A copy of a module that an earlier program in this process installed, and that registers `torch.library`
    operators, registers them under namespaces of its own (`own_operator_namespaces`)."""
    workdir = workdir or Path(tempfile.mkdtemp(prefix="klineage-program-"))
    main = program.write(workdir)
    files = {dotted: workdir / "modules" / f"{dotted}.py" for dotted in program.modules}
    for dotted, file in files.items():
        if copies := _installed_copies.get(dotted, 0):  # the tag names this import: the same program may come twice
            source = program.modules[dotted]
            if (renamed := own_operator_namespaces(source, f"{program.hash[:8]}{copies}")) != source:
                file.write_text(renamed)
        _installed_copies[dotted] = copies + 1
    if files:
        sys.meta_path.insert(0, ModuleOverrides(files))
        for dotted in files:
            sys.modules.pop(dotted, None)
    module_name = f"klineage_program_{program.hash}"
    spec = importlib.util.spec_from_file_location(module_name, main)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # Triton and dataclasses look kernels' modules up by name
    spec.loader.exec_module(module)
    return module


# torch.library registrations a module makes at import: `custom_op("ns::op")`, `triton_op("ns::op")`,
# `torch.library.define("ns::op(...)")`, and `Library("ns", kind)` whose `lib.define("op(...)")` defines `ns::op`
_REGISTERED = re.compile(r"""\b(?:custom_op|triton_op|define)\(\s*(["'])(\w+)::(\w+)""")
_LIBRARY = re.compile(r"""\bLibrary\(\s*(["'])(\w+)\1""")
_DEFINED = re.compile(r"""\.define\(\s*(["'])(\w+)\(""")


def own_operator_namespaces(source: str, tag: str) -> str:
    """`source` (a module copy) with the operators it defines moved to namespaces of its own (`ns` becomes
    `ns_k<tag>`), and its own uses of them (`torch.ops.ns.op`, `"ns::op"`) with them; operators it only uses keep
    their names. Why: the profile gate times two programs side by side in one process, each with its copy of a
    module, and the second copy's registration of an operator the first registered raised (torchao's intmm_triton,
    `torchao::int_matmul`: every candidate's timing failed, H100, RESULTS.md#wild-quant); one made with
    `triton_op` or `custom_op` would otherwise dispatch both programs' calls to one copy's kernels. The program's
    hash is of its source as written; only the file imported is renamed. A `Library` that defines operators moves
    whole: one that only adds kernels to operators defined elsewhere would then miss them (none seen so far)."""
    own = {(m.group(2), m.group(3)) for m in _REGISTERED.finditer(source)}
    defined = {m.group(2) for m in _DEFINED.finditer(source)}
    libraries = {m.group(2) for m in _LIBRARY.finditer(source)} if defined else set()
    own |= {(ns, op) for ns in libraries for op in defined}
    if not own:
        return source

    def name(ns: str, op: str) -> str:
        return f"{ns}_k{tag}" if (ns, op) in own else ns

    out = _LIBRARY.sub(
        lambda m: (
            f"Library({m.group(1)}{m.group(2) + '_k' + tag if m.group(2) in libraries else m.group(2)}{m.group(1)}"
        ),
        source,
    )
    out = re.sub(r"""(["'])(\w+)::(\w+)""", lambda m: f"{m.group(1)}{name(m.group(2), m.group(3))}::{m.group(3)}", out)
    used = re.compile(r"\btorch\.ops\.(\w+)\.(\w+)")
    return used.sub(lambda m: f"torch.ops.{name(m.group(1), m.group(2))}.{m.group(2)}", out)
