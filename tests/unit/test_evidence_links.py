"""A comment that rests on a measurement points at it: `RESULTS.md#run-N` names an anchor of docs/RESULTS.md, and
no comment or docstring says "run N" or "session N" without such a pointer (docs/contributing.md, Style)."""

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "RESULTS.md"
PACKAGE = ROOT / "src" / "klineage"
PROGRAMS_UNDER_TEST = {"examples", "suites"}  # not ours to comment on

CITATION = re.compile(r"RESULTS\.md#([A-Za-z0-9_-]+)")
ANCHOR = re.compile(r'<a id="([^"]+)"></a>')
ANCHORS_ONLY = re.compile(r'(<a id="[^"]+"></a>)+')
NARRATION = re.compile(r"\b[Rr]uns? [0-9]+|\b[Ss]essions? [0-9]+")


def _anchors() -> list[str]:
    return ANCHOR.findall(RESULTS.read_text())


def _modules() -> list[str]:
    """Top-level modules and subpackages of klineage, as test_layering.ORDER names them."""
    names = {p.stem for p in PACKAGE.glob("*.py")} | {
        p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()
    }
    return sorted(names - PROGRAMS_UNDER_TEST)


def _files(module: str) -> list[Path]:
    path = PACKAGE / module
    return sorted(path.rglob("*.py")) if path.is_dir() else [PACKAGE / f"{module}.py"]


def _prose(source: str) -> dict[int, str]:
    """The comments and docstrings of a source, by line number (1-based): a comment's text, a docstring's line."""
    text = source.splitlines()
    prose = {}
    for node in ast.walk(ast.parse(source)):  # a docstring, or any other string standing alone as a statement
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            prose.update((n, text[n - 1]) for n in range(node.lineno, node.end_lineno + 1))
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            prose[tok.start[0]] = tok.string
    return prose


def _narrations(file: Path) -> list[str]:
    """Comment and docstring lines that name a run or session with no RESULTS.md# pointer on that line or the one
    before."""
    source = file.read_text()
    text = [""] + source.splitlines()
    return [
        f"{file.relative_to(ROOT)}:{n}: {line.strip()}"
        for n, line in sorted(_prose(source).items())
        if NARRATION.search(line) and "RESULTS.md#" not in text[n] + text[n - 1]
    ]


def test_results_anchors_are_unique_and_precede_every_heading():
    lines = RESULTS.read_text().splitlines()
    anchors = _anchors()
    assert len(anchors) == len(set(anchors)), sorted(a for a in anchors if anchors.count(a) > 1)
    fence, bare = False, []
    for i, line in enumerate(lines):
        fence ^= line.startswith("```")
        if not fence and re.match(r"#{2,6} ", line) and not (i and ANCHORS_ONLY.fullmatch(lines[i - 1])):
            bare.append(line)
    assert not bare, f"give these RESULTS.md headings an anchor on the line before: {bare}"


def test_every_cited_anchor_exists():
    anchors = set(_anchors())
    missing = []
    for folder in (PACKAGE, ROOT / "benchmarks"):
        for file in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in {".py", ".md", ".sh"}):
            for n, line in enumerate(file.read_text(errors="replace").splitlines(), 1):
                missing += [f"{file.relative_to(ROOT)}:{n}: #{a}" for a in CITATION.findall(line) if a not in anchors]
    assert not missing, "no such anchor in docs/RESULTS.md:\n" + "\n".join(missing)


@pytest.mark.parametrize("module", _modules())
def test_comments_point_at_the_run_they_cite(module):
    found = [line for file in _files(module) for line in _narrations(file)]
    assert not found, "say why, and cite the evidence as RESULTS.md#run-N:\n" + "\n".join(found)
