"""Helpers shared by the transform fixture tests."""

import ast

import pytest

from klineage.program import module_file
from klineage.transform import Transform, matching_optimize_site


def installed_source(module: str) -> str:
    """The source of an installed module (Liger-Kernel's, read at test time, never copied); skips without it.
    Found without importing its package (`program.module_file`): Liger's `__init__` imports its functional API,
    4-9 s of a test on 2 cores."""
    path = module_file(module)
    if path is None:
        pytest.skip(f"{module} is not installed (the experts extra)")
    return path.read_text()


def simplify_all(transform: Transform, source: str) -> str:
    """Undo every site of `transform`, one at a time."""
    while sites := transform.sites(source):
        source = transform.simplify(source, sites[0])
    return source


def assert_round_trips(transform: Transform, source: str, limit: int | None = None) -> list:
    """Every site (the first `limit`): simplify, find the matching optimize site, redo with the expert's
    parameters, get `source` back exactly. Returns all the sites."""
    sites = transform.sites(source)
    for site in sites[:limit]:
        simplified = transform.simplify(source, site)
        ast.parse(simplified)
        match = matching_optimize_site(transform, simplified, site)
        assert match is not None, site
        assert transform.optimize(simplified, match, site.params) == source
    return sites


def round_trip(transform: Transform, source: str) -> int:
    """`assert_round_trips`, returning how many sites round-tripped."""
    return len(assert_round_trips(transform, source))
