import importlib.util
import textwrap

import pytest

from klineage.transforms.config_knobs import ConfigKnobs
from tests.transforms.roundtrip import installed_source, round_trip

# a library's autotuner over a list its runtime reads from a tuning file (FlagGems's libtuner form), Triton's own
# over a helper's call, one over a literal list (the launch-configuration search's), one cut to its first config
SIMPLE = textwrap.dedent(
    """\
    import triton
    import triton.language as tl

    from lib import libtuner, runtime


    @libtuner(
        configs=runtime.get_tuned_config("naive_reduction"),
        key=["M", "N"],
    )
    @triton.jit
    def reduce_kernel(x_ptr, M, N, BLOCK_N: tl.constexpr):
        pass


    @triton.autotune(configs=tuned("mm"), key=["K"])
    @triton.jit
    def mm_kernel(a_ptr, K, BLOCK_K: tl.constexpr):
        pass


    @triton.autotune(configs=[triton.Config({"B": 64}, num_warps=4)], key=["n"])
    @triton.jit
    def literal_kernel(x_ptr, n, B: tl.constexpr):
        pass


    @triton.autotune(configs=tuned("one")[:1], key=["n"])
    @triton.jit
    def cut_kernel(x_ptr, n, B: tl.constexpr):
        pass


    @libtuner(configs=runtime.get_tuned_config("host"), key=["n"])
    def not_a_kernel(n):
        pass
    """
)
COPY = (
    "triton.Config(config.kwargs, num_warps={w}, num_stages={s}, num_ctas=config.num_ctas, "
    "maxnreg=config.maxnreg, pre_hook=config.pre_hook, ir_override=config.ir_override)"
)
EXPERT = SIMPLE.replace(
    'configs=runtime.get_tuned_config("naive_reduction"),',
    f'configs=[{COPY.format(w="8", s="config.num_stages")} for config in runtime.get_tuned_config("naive_reduction")],',
).replace('configs=tuned("mm"),', f'configs=[{COPY.format(w="config.num_warps", s="2")} for config in tuned("mm")],')


def test_simplify_fixture():
    t = ConfigKnobs()
    sites = t.sites(EXPERT)
    assert [(s.function, s.params) for s in sites] == [
        ("reduce_kernel", {"num_warps": "8"}),
        ("mm_kernel", {"num_stages": "2"}),
    ]
    once = t.simplify(EXPERT, sites[0])
    assert 'configs=runtime.get_tuned_config("naive_reduction"),' in once
    assert t.simplify(once, t.sites(once)[0]) == SIMPLE


def test_optimize_fixture():
    t = ConfigKnobs()
    plain = t.optimize_sites(SIMPLE)
    # the literal list, the list cut to one config and the host function's decorator are not sites
    assert [s.function for s in plain] == ["reduce_kernel", "mm_kernel"]
    once = t.optimize(SIMPLE, plain[0], {"num_warps": "8"})
    assert t.optimize(once, t.optimize_sites(once)[0], {"num_stages": "2"}) == EXPERT
    with pytest.raises(ValueError, match="power of two"):
        t.optimize(SIMPLE, plain[0], {"num_warps": "6"})
    with pytest.raises(KeyError):
        t.optimize(SIMPLE, plain[0], {"BLOCK_N": "64"})


def test_optimize_needs_import_triton():
    source = SIMPLE.replace("import triton\n", "from triton import Config\nimport triton.language as tl2\n", 1)
    assert ConfigKnobs().optimize_sites(source) == []


def test_expert_form_in_another_layout_is_read():
    wrapped = ",\n        num_stages=config.num_stages,\n        "
    laid_out = EXPERT.replace(", num_stages=config.num_stages, ", wrapped, 1)
    assert [s.params for s in ConfigKnobs().sites(laid_out)][0] == {"num_warps": "8"}


def test_round_trip_fixture():
    assert round_trip(ConfigKnobs(), EXPERT) == 2


def test_rewritten_configs_carry_the_knobs_and_keep_the_rest(tmp_path):
    """The rewrite run as Python: each config gets the warps, keeps its tiles, stages, CTAs and hook."""
    import triton

    def hook(args):
        return None

    source = textwrap.dedent(
        """\
        import triton
        import triton.language as tl


        def tuned(name):  # an argument: no literal list the launch-configuration search reads
            return [triton.Config({"B": 64}, num_warps=4, num_stages=2, pre_hook=HOOK),
                    triton.Config({"B": 128}, num_warps=2, num_stages=3, num_ctas=1)]


        @triton.autotune(configs=tuned("k"), key=["n"])
        @triton.jit
        def k(x_ptr, n, B: tl.constexpr):
            pass
        """
    )
    t = ConfigKnobs()
    rewritten = t.optimize(source, t.optimize_sites(source)[0], {"num_warps": "16"})
    path = tmp_path / "rewritten.py"
    path.write_text(rewritten)
    spec = importlib.util.spec_from_file_location("rewritten_config_knobs", path)
    module = importlib.util.module_from_spec(spec)
    module.HOOK = hook
    spec.loader.exec_module(module)
    configs = module.k.configs
    assert all(isinstance(c, triton.Config) for c in configs)
    assert [(c.kwargs, c.num_warps, c.num_stages, c.pre_hook) for c in configs] == [
        ({"B": 64}, 16, 2, hook),
        ({"B": 128}, 16, 3, None),
    ]


def test_round_trip_installed_flag_gems():
    """Every FlagGems kernel tuned over a run-time list: set, read back, undone exactly (where it is installed)."""
    source = installed_source("flag_gems.ops.amax")
    t = ConfigKnobs()
    (site,) = t.optimize_sites(source)
    assert site.function == "amax_kernel"
    assert round_trip(t, t.optimize(source, site, {"num_warps": "8", "num_stages": "2"})) == 1


def test_an_aliased_import_binds_its_alias_not_the_package():
    """What every family that writes `triton.` asks before it does (`_anchored.imported_modules`)."""
    import libcst as cst

    from klineage.transforms._anchored import imported_modules

    tree = cst.parse_module("import triton.language as tl\nimport torch.nn\nimport math, os as o\n")
    assert imported_modules(tree) == {"tl", "torch", "math", "o"}
