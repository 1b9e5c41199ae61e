import textwrap
from pathlib import Path

from klineage.transforms.autotune_single_config import AutotuneSingleConfig
from tests.transforms.roundtrip import round_trip

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "klineage" / "examples"

EXPERT = textwrap.dedent(
    """\
    import triton
    import triton.language as tl


    @triton.autotune(
        configs=[
            triton.Config({"BLOCK": 1024}, num_warps=8, num_stages=2),
            triton.Config({"BLOCK": 256}, num_warps=4),
        ],
        key=["n"],
        reset_to_zero=["out_ptr"],
    )
    @triton.jit
    def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0)))


    def launch(x, out, n):
        grid = lambda META: (triton.cdiv(n, META["BLOCK"]),)
        k[grid](x, out, n)
    """
)

SIMPLE = textwrap.dedent(
    """\
    import triton
    import triton.language as tl


    @triton.jit
    def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0)))


    def launch(x, out, n):
        grid = lambda META: (triton.cdiv(n, META["BLOCK"]),)
        k[grid](x, out, n, BLOCK=1024, num_warps=8, num_stages=2)
    """
)

DECORATOR = """triton.autotune(
    configs=[
        triton.Config({"BLOCK": 1024}, num_warps=8, num_stages=2),
        triton.Config({"BLOCK": 256}, num_warps=4),
    ],
    key=["n"],
    reset_to_zero=["out_ptr"],
)"""


def test_simplify_fixture():
    t = AutotuneSingleConfig()
    (site,) = t.sites(EXPERT)
    assert site.function == "k" and site.line == 5
    assert site.params["key"] == '["n"]' and site.params["reset_to_zero"] == '["out_ptr"]'
    assert site.params["configs"].startswith("[\n") and site.params["decorator"] == DECORATOR
    assert t.simplify(EXPERT, site) == SIMPLE


def test_optimize_fixture():
    t = AutotuneSingleConfig()
    (site,) = t.optimize_sites(SIMPLE)
    assert t.optimize(SIMPLE, site, {"decorator": DECORATOR}) == EXPERT
    # Without the verbatim decorator: rebuilt from configs/key/reset_to_zero (same code up to layout).
    params = {
        "configs": '[triton.Config({"BLOCK": 1024}, num_warps=8, num_stages=2)]',
        "key": '["n"]',
        "reset_to_zero": '["out_ptr"]',
    }
    out = t.optimize(SIMPLE, site, params)
    assert (
        '@triton.autotune(configs=[triton.Config({"BLOCK": 1024}, num_warps=8, num_stages=2)], key=["n"], '
        'reset_to_zero=["out_ptr"])\n@triton.jit\n' in out
    )
    assert "k[grid](x, out, n)\n" in out


def test_round_trip_fixture():
    assert round_trip(AutotuneSingleConfig(), EXPERT) == 1


def test_round_trip_bundled_matmul():
    # configs=_configs(), a helper returning a literal list: the first config goes to the launch.
    src = (EXAMPLES / "matmul" / "tuned.py").read_text()
    t = AutotuneSingleConfig()
    (site,) = t.sites(src)
    assert site.params["configs"] == "_configs()" and site.params["key"] == '["M", "N", "K"]'
    simplified = t.simplify(src, site)
    assert "\n@triton.autotune(" not in simplified
    assert "BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_SIZE_M=8, num_stages=3, num_warps=8," in simplified
    assert round_trip(t, src) == 1


def test_skips():
    t = AutotuneSingleConfig()
    assert t.sites("x = 1\n") == [] and t.optimize_sites("x = 1\n") == []
    comprehension = EXPERT.replace(
        '[\n        triton.Config({"BLOCK": 1024}, num_warps=8, num_stages=2),\n'
        '        triton.Config({"BLOCK": 256}, num_warps=4),\n    ]',
        '[triton.Config({"BLOCK": b}) for b in [256, 1024] if b > n_min]',
    )
    assert comprehension != EXPERT and t.sites(comprehension) == []  # a filtered comprehension
    assert t.sites(comprehension.replace(" if b > n_min", "").replace("[256, 1024]", "sizes()")) == []  # run time
    # the host reads the autotuner object: not only launches
    assert t.sites(EXPERT + "\nprint(k.best_config)\n") == []
    # a pre_hook has no launch equivalent: the first config stays in the decorator, the launches as they are
    (hooked,) = t.sites(EXPERT.replace("num_warps=8, num_stages=2)", "num_warps=8, pre_hook=h)"))
    assert hooked.before.startswith("@triton.autotune(") and "BLOCK=1024" not in hooked.after
    # one hooked config already: nothing to cut
    one = EXPERT.replace('        triton.Config({"BLOCK": 256}, num_warps=4),\n', "")
    assert t.sites(one.replace("num_warps=8, num_stages=2)", "num_warps=8, pre_hook=h)")) == []
    # never launched here
    assert t.sites(EXPERT.split("\n\ndef launch")[0] + "\n") == []
    assert t.sites("def broken(:\n") == []


HOOKED = textwrap.dedent(
    """\
    import triton
    import triton.language as tl


    def _box(nargs):
        nargs["seen"].append(nargs["BLOCK"])


    def _configs():
        return [
            triton.Config({"BLOCK": 128}, num_warps=8, num_stages=3, pre_hook=_box),
            triton.Config({"BLOCK": 64}, num_warps=4, num_stages=3, pre_hook=_box),
        ]


    @triton.autotune(configs=_configs(), key=["n"])
    @triton.jit
    def k(x_ptr, n, seen, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


    def launch(x, n, seen):
        k[lambda META: (triton.cdiv(n, META["BLOCK"]),)](x, n, seen)
    """
)


def test_configs_with_a_pre_hook_keep_the_first_config_in_the_decorator():
    """A launch cannot run a pre_hook, so the simple form is the autotuner over the first config alone; the redo
    puts the expert's decorator back verbatim, and the skill's configs still carry the tiles."""
    from klineage.proposers import expert_tiles

    t = AutotuneSingleConfig()
    (site,) = t.sites(HOOKED)
    simple = t.simplify(HOOKED, site)
    assert (
        '@triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=8, num_stages=3, pre_hook=_box)], '
        'key=["n"])' in simple
    )
    assert 'k[lambda META: (triton.cdiv(n, META["BLOCK"]),)](x, n, seen)' in simple  # the launch unchanged
    assert round_trip(t, HOOKED) == 1
    (back,) = t.optimize_sites(simple)
    assert back.function == "k" and t.optimize(simple, back, site.params) == HOOKED
    assert t.sites(simple) == []  # one config: nothing left to simplify
    assert expert_tiles(site.params) == [
        {"BLOCK": 128, "num_warps": 8, "num_stages": 3},
        {"BLOCK": 64, "num_warps": 4, "num_stages": 3},
    ]


def test_the_attention_experts_hooked_configs_round_trip():
    source = (EXAMPLES / "attention" / "expert.py").read_text()
    t = AutotuneSingleConfig()
    (site,) = t.sites(source)
    assert site.function == "_attn_fwd" and round_trip(t, source) == 1
    assert "pre_hook=_kv_box)], key=" in t.simplify(source, site)


COMPREHENSION = textwrap.dedent(
    """\
    import triton
    import triton.language as tl

    IS_AMD = False
    NUM_WARPS = [2, 4, 8] if IS_AMD else [1, 2, 4, 8, 16]


    @triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
    @triton.autotune(
        configs=[
            triton.Config({"BLOCK": b}, num_warps=num_warps, num_stages=s)
            for b in (256, 1024)
            for num_warps in NUM_WARPS
            for s in [1, 2]
        ],
        key=["n"],
    )
    @triton.jit
    def k(x_ptr, n, EVEN: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


    def launch(x, n):
        k[lambda META: (triton.cdiv(n, META["BLOCK"]),)](x, n)
    """
)


def test_comprehension_configs_expand_and_heuristics_stay():
    """FLA's form (most of its 200 autotuned kernels): configs from a comprehension over literal lists, one of them
    a module-level `A if C else B`, under `@triton.heuristics`. The configs expand in the comprehension's order,
    the platform-dependent list to the values both branches hold (2, 4, 8), and the first config goes to the launch;
    the heuristics decorator stays on the kernel."""
    t = AutotuneSingleConfig()
    (site,) = t.sites(COMPREHENSION)
    configs = site.params["config_list"]
    assert configs.count("triton.Config(") == 2 * 3 * 2
    assert configs.startswith('[triton.Config({"BLOCK": 256}, num_warps=2, num_stages=1), ')
    assert configs.endswith('triton.Config({"BLOCK": 1024}, num_warps=8, num_stages=2)]')
    simplified = t.simplify(COMPREHENSION, site)
    assert "@triton.autotune(" not in simplified and "@triton.heuristics(" in simplified
    assert "(x, n, BLOCK=256, num_warps=2, num_stages=1)" in simplified
    compile(simplified, "simplified", "exec")
    assert round_trip(t, COMPREHENSION) == 1  # the redo puts the autotune back under the heuristics


def test_comprehension_without_common_values_or_too_large_is_skipped():
    t = AutotuneSingleConfig()
    disjoint = COMPREHENSION.replace("[2, 4, 8] if IS_AMD", "[32] if IS_AMD")
    assert t.sites(disjoint) == []
    huge = COMPREHENSION.replace("for s in [1, 2]", "for s in list(range(1000))")
    assert t.sites(huge) == []
    big = COMPREHENSION.replace("for s in [1, 2]", "for s in [" + ", ".join(map(str, range(50))) + "]")
    assert t.sites(big) == []  # 2 x 3 x 50 configs: over MAX_EXPANDED
    # a decorator other than heuristics above the autotune: not a form this knows
    assert t.sites(COMPREHENSION.replace("@triton.heuristics(", "@other(")) == []
