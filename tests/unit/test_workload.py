import pytest

from klineage.workload import DISTRIBUTIONS, WorkloadError, load_workload, make_case_inputs, redraw, source_hash
from tests.conftest import EXAMPLES, FIXTURES


def write(tmp_path, text, name="w.py"):
    path = tmp_path / name
    path.write_text(text)
    return path


KB_CORE = """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.randn(16, 16)]
def get_init_inputs():
    return []
"""


def test_kernelbench_file_loads_unchanged(tmp_path):
    wl = load_workload(write(tmp_path, KB_CORE))
    assert wl.cases == {"default": {}}
    assert not wl.has_extensions
    assert wl.check_cases("cpu") == ["default"]


def test_extensions_are_read():
    wl = load_workload(FIXTURES / "scale_add.py")
    assert set(wl.cases) == {"tiny", "odd", "bench"}
    assert wl.check_cases("cpu") == ["tiny", "odd"]  # bench is too big for the interpreter
    assert wl.check_cases("cuda") == ["tiny", "odd", "bench"]
    assert wl.seed_case("cpu") == "tiny" and wl.seed_case("cuda") == "bench"
    assert wl.has_roofline and wl.distributions == DISTRIBUTIONS


@pytest.mark.parametrize(
    "text, message",
    [
        ("import torch\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n", "no class Model"),
        (KB_CORE.replace("def get_inputs", "def other"), "no function get_inputs"),
        (KB_CORE + "get_init_inputs = [1]\n", "get_init_inputs must be a function"),
        (KB_CORE + "CASES = {'tiny': {'n': 1}}\n", "no make_inputs"),
        (KB_CORE + "CASES = []\n", "CASES must be"),
        (KB_CORE + "CASES = {'t': {'dtype': 'float8'}}\ndef make_inputs(c, s): return []\n", "dtype 'float8'"),
        (KB_CORE + "TOLERANCES = {'float32': {'bogus': 1}}\n", "TOLERANCES['float32']"),
        (KB_CORE + "DISTRIBUTIONS = ('cauchy',)\n", "DISTRIBUTIONS"),
        ("def broken(:\n", "syntax error at line 1"),
        ("import torch\nraise RuntimeError('boom')\n", "failed to import: RuntimeError: boom"),
    ],
)
def test_malformed_workload_is_one_line(tmp_path, text, message):
    with pytest.raises(WorkloadError) as err:
        load_workload(write(tmp_path, text))
    assert message in str(err.value)
    assert "\n" not in str(err.value)
    assert "w.py" in str(err.value)


def test_missing_workload(tmp_path):
    with pytest.raises(WorkloadError, match="no such file"):
        load_workload(tmp_path / "nope.py")


def test_hash_ignores_comments_and_formatting():
    assert source_hash("x = 1  # a\n") == source_hash("x=1\n")
    assert source_hash("x = 1\n") != source_hash("x = 2\n")


def test_tolerance_override_merges_with_defaults(tmp_path):
    wl = load_workload(write(tmp_path, KB_CORE + "TOLERANCES = {'float32': {'norm': 1e-3}}\n"))
    tol = wl.tolerance("float32")
    assert tol.norm == 1e-3 and tol.rtol == 1e-4


def test_inputs_are_seeded_and_redrawn():
    import importlib.util

    spec = importlib.util.spec_from_file_location("sa", FIXTURES / "scale_add.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    case = {"n": 500, "dtype": "float32"}
    a = make_case_inputs(mod, case, 3)
    b = make_case_inputs(mod, case, 3)
    c = make_case_inputs(mod, case, 4)
    assert all((x == y).all() for x, y in zip(a, b))
    assert not (a[0] == c[0]).all()
    heavy = make_case_inputs(mod, case, 3, "heavy_tailed")[0]
    assert heavy.dtype == a[0].dtype and heavy.shape == a[0].shape
    assert heavy.abs().max() > 5 * a[0].abs().max() / 2  # heavy tails reach far beyond a normal's range
    assert (make_case_inputs(mod, case, 3, "uniform_signed")[0].abs() <= 1).all()


def test_redraw_keeps_strides():
    import torch

    x = torch.randn(8, 6).t()
    y = redraw(x, "scaled", torch.Generator().manual_seed(0))
    assert y.stride() == x.stride() and y.shape == x.shape


def test_bundled_example_workloads_load():
    for folder in ("softmax", "rmsnorm", "matmul"):
        wl = load_workload(EXAMPLES / folder / "workload.py")
        assert {"tiny", "bench"} <= set(wl.cases)
        assert wl.has_roofline


def test_bench_sized_inputs_are_drawn_once_with_an_input_cache(tmp_path, monkeypatch):
    import types

    import torch

    from klineage.config import Settings
    from klineage.workload import INPUT_CACHE_MIN_BYTES, make_case_inputs

    source = tmp_path / "wl.py"
    source.write_text(
        "import torch\nCALLS = []\n"
        "def make_inputs(case, seed):\n"
        "    CALLS.append(seed)\n"
        "    g = torch.Generator().manual_seed(seed)\n"
        "    x = torch.randn(case['n'], generator=g)\n"
        "    return [x, x[::2], 3]\n"
    )
    module = types.ModuleType("wl")
    module.__file__ = str(source)
    exec(source.read_text(), module.__dict__)
    big = {"n": INPUT_CACHE_MIN_BYTES // 4 + 1}
    cache = tmp_path / "cache"  # Settings.input_cache, from $KLINEAGE_INPUT_CACHE
    first = make_case_inputs(module, big, 1, cache_dir=cache)
    again = make_case_inputs(module, big, 1, cache_dir=cache)
    assert module.CALLS == [1]  # drawn once, then read back
    assert torch.equal(first[0], again[0]) and again[2] == 3
    assert again[1].stride() == (2,) and again[1].untyped_storage().data_ptr() == again[0].untyped_storage().data_ptr()
    make_case_inputs(module, big, 2, cache_dir=cache)
    make_case_inputs(module, big, 1, distribution="heavy_tailed", cache_dir=cache)
    assert module.CALLS == [1, 2, 1]  # another seed or distribution is another entry
    make_case_inputs(module, {"n": 8}, 1, cache_dir=cache)
    make_case_inputs(module, {"n": 8}, 1, cache_dir=cache)
    assert module.CALLS == [1, 2, 1, 1, 1]  # small inputs are cheaper to draw than to read
    make_case_inputs(module, big, 1)
    assert module.CALLS[-1] == 1 and len(module.CALLS) == 6  # no cache: never read
    monkeypatch.setenv("KLINEAGE_INPUT_CACHE", str(cache))  # the user's knob, read once (h200_eval.sh sets it)
    assert Settings.from_env().inputs_dir == cache
    monkeypatch.setenv("KLINEAGE_INPUT_CACHE", "off")
    assert Settings.from_env().inputs_dir is None
    monkeypatch.delenv("KLINEAGE_INPUT_CACHE")
    assert Settings(data_dir=tmp_path / "home").inputs_dir == tmp_path / "home" / "inputs"  # on by default


def test_the_input_cache_keeps_the_most_recently_used_within_its_size(tmp_path):
    import os

    from klineage.workload import prune_input_cache

    for i, age in enumerate([300, 100, 200]):
        path = tmp_path / f"set{i}.pt"
        path.write_bytes(bytes(1000))
        os.utime(path, (path.stat().st_atime - age, path.stat().st_mtime - age))
    (tmp_path / "other.txt").write_bytes(bytes(5000))  # not a set: never counted nor removed
    assert prune_input_cache(tmp_path, 2500) == 1
    assert sorted(p.name for p in tmp_path.glob("*.pt")) == ["set1.pt", "set2.pt"]  # the oldest went
    assert prune_input_cache(tmp_path, 0) == 2 and (tmp_path / "other.txt").exists()


def test_on_device_keeps_a_strided_layout():
    """Tensor.to makes a strided view contiguous (meta shows it as cuda would): timing must see the layout the
    correctness gate sees."""
    import torch

    from klineage.workload import on_device

    every_other = torch.arange(12.0)[::2]
    assert every_other.to("meta").stride() == (1,)  # what the timing inputs were before
    assert on_device(every_other, "meta").stride() == (2,)
    padded = torch.randn(4, 8)[:, :5]
    assert on_device(padded, "meta").stride() == (8, 1)
    moved = on_device(padded, "cpu")
    assert moved.stride() == (8, 1) and torch.equal(moved, padded)
    assert on_device(torch.randn(3, 4).t(), "meta").stride() == (1, 4)  # dense, not contiguous: kept as it was
    assert on_device(torch.randn(1, 4).expand(3, 4), "meta").shape == (3, 4)  # overlap: materialized
    assert on_device(7, "meta") == 7


def test_timing_inputs_of_the_strided_heldout_keep_their_stride():
    import importlib.util

    from klineage.gates.common import input_sets
    from klineage.suites import suite_instances

    workload_path = next(w for w, _ in suite_instances("heldout") if w.parent.name == "strided_add")
    spec = importlib.util.spec_from_file_location("strided_add_wl", workload_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ((x, y),) = input_sets(mod, mod.CASES["tiny"], 1, device="meta")
    assert x.stride() == (2,) and y.stride() == (1,)
