import ast
import textwrap
from pathlib import Path

from klineage.transform import matching_optimize_site
from klineage.transforms.grouped_ordering import GroupedOrdering

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "klineage" / "examples"

HEAD = """\
import triton
import triton.language as tl


@triton.jit
def mm(c_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr, GROUP: tl.constexpr):
    pid = tl.program_id(0)
    n_m = tl.cdiv(M, BM)
    n_n = tl.cdiv(N, BN)
"""
TAIL = """\
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], 0.0, mask=(rm[:, None] < M) & (rn[None, :] < N))
"""
EXPERT = (
    HEAD
    + textwrap.indent(
        textwrap.dedent("""\
    width = GROUP * n_n
    gid = pid // width
    first = gid * GROUP
    gsize = tl.minimum(n_m - first, GROUP)
    pm = first + ((pid % width) % gsize)
    pn = (pid % width) // gsize
"""),
        "    ",
    )
    + TAIL
)
SIMPLE = HEAD + "    pm = pid // n_n\n    pn = pid % n_n\n" + TAIL
PARAMS = {
    "GROUP_SIZE_M": "GROUP",
    "min": "tl.minimum",
    "num_pid_in_group": "width",
    "group_id": "gid",
    "first_pid_m": "first",
    "group_size_m": "gsize",
    "num_pid_m": "n_m",
}


def test_simplify_fixture():
    t = GroupedOrdering()
    (site,) = t.sites(EXPERT)
    assert site.function == "mm" and site.line == 10 and site.params == PARAMS
    assert t.simplify(EXPERT, site) == SIMPLE


def test_optimize_fixture():
    t = GroupedOrdering()
    (site,) = t.optimize_sites(SIMPLE)
    assert site.params == {"pid": "pid", "num_pid_n": "n_n", "pid_m": "pm", "pid_n": "pn", "num_pid_m": "n_m"}
    assert t.optimize(SIMPLE, site, PARAMS) == EXPERT
    # With no expert params: Triton tutorial 03's names and a literal group of 8.
    out = t.optimize(SIMPLE, site, {})
    assert "    num_pid_in_group = 8 * n_n\n" in out and "    group_size_m = min(n_m - first_pid_m, 8)\n" in out


def test_round_trip_fixture():
    t = GroupedOrdering()
    (site,) = t.sites(EXPERT)
    simplified = t.simplify(EXPERT, site)
    target = matching_optimize_site(t, simplified, site)
    assert t.optimize(simplified, target, site.params) == EXPERT


def test_round_trip_bundled_matmul():
    src = (EXAMPLES / "matmul" / "tuned.py").read_text()
    t = GroupedOrdering()
    (site,) = t.sites(src)
    assert site.params["GROUP_SIZE_M"] == "GROUP_SIZE_M" and site.params["min"] == "min"
    simplified = t.simplify(src, site)
    assert "    pid_m = pid // num_pid_n\n    pid_n = pid % num_pid_n\n" in simplified
    target = matching_optimize_site(t, simplified, site)
    back = t.optimize(simplified, target, site.params)
    # The comments inside the six statements do not come back: equal up to comments.
    assert ast.dump(ast.parse(back)) == ast.dump(ast.parse(src))


def test_skips():
    t = GroupedOrdering()
    assert t.sites("x = 1\n") == [] and t.optimize_sites("x = 1\n") == []
    # the last group's min() is missing: not the bijective form, not a site
    assert t.sites(EXPERT.replace("tl.minimum(n_m - first, GROUP)", "GROUP")) == []
    # an intermediate read later in the kernel
    assert t.sites(EXPERT.replace("    rm = pm * BM", "    rm = gid + pm * BM")) == []
    # div/mod pairs that are not a tile mapping (pid not from program_id)
    assert t.optimize_sites(SIMPLE.replace("pid = tl.program_id(0)", "pid = M + 1")) == []
    # host code is not a kernel
    assert t.optimize_sites(SIMPLE.replace("@triton.jit\n", "")) == []
    assert t.sites("def broken(:\n") == []


def test_a_kernel_counting_only_its_column_tiles_is_grouped_after_counting_its_rows():
    """The naive matmul computes num_pid_n only; optimize adds num_pid_m = tl.cdiv(M, BLOCK_M) (names read off
    num_pid_n's with N -> M) and the result is an expert site again."""
    naive = (EXAMPLES / "matmul" / "naive.py").read_text()
    t = GroupedOrdering()
    (site,) = t.optimize_sites(naive)
    assert site.params["num_pid_m_from"] == "tl.cdiv(M, BLOCK_M)"
    grouped = t.optimize(naive, site, {"GROUP_SIZE_M": "8"})
    assert "num_pid_m = tl.cdiv(M, BLOCK_M)\n    num_pid_in_group = 8 * num_pid_n" in grouped
    (expert_site,) = t.sites(grouped)
    assert expert_site.params["GROUP_SIZE_M"] == "8"
    compile(grouped, "grouped", "exec")
