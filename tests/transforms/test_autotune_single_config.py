import textwrap
from pathlib import Path

from klineage.transforms.autotune_single_config import AutotuneSingleConfig
from tests.transforms.roundtrip import assert_round_trips, round_trip

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
    # a filtered comprehension, a list built at run time: what the first config is is known only where it runs,
    # so the autotuner stays over the list cut to its first config
    assert comprehension != EXPERT
    for runtime in (comprehension, comprehension.replace(" if b > n_min", "").replace("[256, 1024]", "sizes()")):
        (site,) = t.sites(runtime)
        assert (
            site.after.startswith("@triton.autotune(") and "][:1]," in site.after and "config_list" not in site.params
        )
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


def test_comprehension_not_expanded_keeps_the_autotuner_over_its_first_config():
    """Where the list cannot be expanded here (branches without a common value, a run-time range, over
    MAX_EXPANDED) or a wrapper stands above the autotune, no launch can pass its first config: the autotuner stays,
    over the list cut to its first config (`[:1]`)."""
    t = AutotuneSingleConfig()
    disjoint = COMPREHENSION.replace("[2, 4, 8] if IS_AMD", "[32] if IS_AMD")
    huge = COMPREHENSION.replace("for s in [1, 2]", "for s in list(range(1000))")
    big = COMPREHENSION.replace("for s in [1, 2]", "for s in [" + ", ".join(map(str, range(50))) + "]")
    wrapped = COMPREHENSION.replace("@triton.heuristics(", "@other(")
    for source in (disjoint, huge, big, wrapped):
        (site,) = t.sites(source)
        assert "config_list" not in site.params or source is wrapped
        simplified = t.simplify(source, site)
        assert "][:1]," in simplified or "configs=[triton.Config(" in simplified
        assert "@triton.autotune(" in simplified and "(x, n)" in simplified  # the launch as it was
        assert_round_trips(t, source)


LIBRARY_TUNER = textwrap.dedent(
    """\
    import triton
    import triton.language as tl

    from mylib import cached_entry, runtime, tuner


    @cached_entry()
    @tuner(
        configs=runtime.configs_for("rowwise"),
        key=["n"],
    )
    @triton.jit
    def k(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


    def launch(x, n):
        k[lambda META: (triton.cdiv(n, META["BLOCK"]),)](x, n)
    """
)


def test_a_library_autotuner_over_a_run_time_list_keeps_its_first_config():
    """FlagGems's construct (`@libentry()` over `@libtuner(configs=runtime.get_tuned_config(...), key=[...])`, on 4
    of its 6 fused experts): any decorator given configs= and key= is an autotuner; under a wrapper that may read it,
    or over a list built at run time, the simple form keeps it over the first config (`[:1]`), the wrapper in place,
    and the redo restores the decorator verbatim."""
    t = AutotuneSingleConfig()
    (site,) = t.sites(LIBRARY_TUNER)
    simplified = t.simplify(LIBRARY_TUNER, site)
    assert 'configs=runtime.configs_for("rowwise")[:1],' in simplified
    assert simplified.index("@cached_entry()") < simplified.index("@tuner(")
    assert "placement" not in site.params and "config_list" not in site.params
    assert t.sites(simplified) == []  # already the simple form
    assert_round_trips(t, LIBRARY_TUNER)
    # a literal Triton autotune under such a wrapper keeps the autotuner too, over its first literal config
    literal = EXPERT.replace("@triton.autotune(", "@cached_entry()\n@triton.autotune(")
    (wrapped,) = t.sites(literal)
    assert '@triton.autotune(\n    configs=[triton.Config({"BLOCK": 1024}' in t.simplify(literal, wrapped)
    assert_round_trips(t, literal)


def test_an_expert_list_built_at_run_time_carries_no_one_config_autotuner():
    """FlagGems's experts tune over `runtime.get_tuned_config(...)`: no tile to carry. The carried list would be the
    launch's present config alone, an autotuner that changes nothing, and it was ranked first on FlagGems's trace
    with the weight-norm expert's x6.22 behind it; the transform offers nothing instead. A literal list still
    carries, and blind's doubled tiles too."""
    t = AutotuneSingleConfig()
    (site,) = t.optimize_sites(SIMPLE)
    assert t.carry({"configs": 'runtime.get_tuned_config("weight_norm_kernel")', "key": '["M"]'}, SIMPLE, site) is None
    assert t.carry({"configs": '[triton.Config({"BLOCK": 1024}, num_warps=8, num_stages=2)]'}, SIMPLE, site) is None
    carried = t.carry({"configs": '[triton.Config({"BLOCK": 256}, num_warps=4)]'}, SIMPLE, site)
    assert carried is not None and "'BLOCK': 256" in carried["configs"] and "'BLOCK': 1024" in carried["configs"]
    assert t.variants(None, SIMPLE, "k", None) == []
    blind = t.blind_params(SIMPLE, site)
    assert blind is not None and "'BLOCK': 2048" in blind["configs"]


def test_the_grid_reads_the_parameter_a_host_name_is_passed_as():
    """bitsandbytes launches `SPLIT_NUM_BLOCKS=split_num_blocks` with `grid = (triton.cdiv(blocks,
    split_num_blocks),)`: once the configs own the tile, the grid reads META under the kernel's parameter; under the
    host's name it raised KeyError on three candidates of one H100 run (docs/runs/2026-12-06-h100-wild6)."""
    source = textwrap.dedent(
        """\
        import triton
        import triton.language as tl


        @triton.jit
        def k(x_ptr, n, BLOCK_SIZE: tl.constexpr, SPLIT_NUM_BLOCKS: tl.constexpr):
            offs = tl.program_id(0) * SPLIT_NUM_BLOCKS * BLOCK_SIZE + tl.arange(0, SPLIT_NUM_BLOCKS * BLOCK_SIZE)
            tl.store(x_ptr + tl.program_id(0) + tl.arange(0, SPLIT_NUM_BLOCKS), 0.0)


        def launch(x, n, blocks):
            split_num_blocks = 1
            grid = (triton.cdiv(blocks, split_num_blocks),)
            k[grid](x_ptr=x, n=n, BLOCK_SIZE=256, SPLIT_NUM_BLOCKS=split_num_blocks)
        """
    )
    (site,) = AutotuneSingleConfig().optimize_sites(source)
    after = AutotuneSingleConfig().host_side(source, source, site)
    assert 'grid = lambda META: (triton.cdiv(blocks, META["SPLIT_NUM_BLOCKS"]),)' in after
    assert 'META["split_num_blocks"]' not in after
