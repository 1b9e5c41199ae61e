"""A timed pair's autotuners settled alike on both sides (gates.autotune.SettledTuners): the child's autotuner with
the parent's kernel name, keys and configs takes the parent's choice; one with another config list tunes itself;
each side's choice is reported. Fake tuners through Triton's Autotuner.run: nothing runs on a device."""

from types import SimpleNamespace

import pytest

from klineage.gates.answers import checked
from klineage.gates.autotune import AUTOTUNED, SettledTuners
from klineage.gates.profile import PAIR_ANSWER


def _tuner(name: str, configs: list[str]):
    return SimpleNamespace(base_fn=SimpleNamespace(__name__=name), keys=["N"], configs=list(configs), cache={})


@pytest.fixture
def tuning(monkeypatch):
    """Autotuner.run as a tuner that picks by a noisy clock: the parent the first config, the child the last."""
    from triton.runtime.autotuner import Autotuner

    def run(tuner, n, side):
        key = (n,)
        if key not in tuner.cache:
            tuner.cache[key] = tuner.configs[0 if side == "parent" else -1]
        return tuner.cache[key]

    monkeypatch.setattr(Autotuner, "run", run)
    return Autotuner


def test_a_childs_interchangeable_autotuner_runs_the_parents_choice(tuning):
    configs = ["BLOCK: 128, num_warps: 8", "BLOCK: 32, num_warps: 2"]
    parent, child = _tuner("max_kernel", configs), _tuner("max_kernel", configs)
    settled, fake = SettledTuners(), tuning.run
    with settled.side("parent"):
        assert tuning.run(parent, 4096, "parent") == configs[0]
    with settled.side("child", pin_to="parent"):
        assert tuning.run(child, 4096, "child") == configs[0]  # pinned: its own noisy pick would be the last
        assert tuning.run(child, 8192, "child") == configs[1]  # a key the parent never tuned: tuned here
    assert settled.pinned == ["max_kernel"]
    assert settled.chosen("parent") == {"max_kernel": {"(4096,)": configs[0]}}
    assert settled.chosen("child") == {"max_kernel": {"(4096,)": configs[0], "(8192,)": configs[1]}}
    assert tuning.run is fake  # restored after each side
    answer = {"parent_autotuned": settled.chosen("parent"), "child_autotuned": settled.chosen("child")}
    timing = {"median_ms": 1.0, "p20_ms": 1.0, "p80_ms": 1.0, "min_ms": 1.0, "max_ms": 1.0, "reps": 30}
    timing |= {"wall_median_ms": 1.0}
    checked({"parent": timing, "child": timing, "setup_s": 0.1, **answer, "pinned": settled.pinned}, PAIR_ANSWER)
    checked(answer["child_autotuned"], AUTOTUNED)


def test_another_config_list_is_tuned_on_its_own_side(tuning):
    parent = _tuner("max_kernel", ["BLOCK: 128", "BLOCK: 32"])
    child = _tuner("max_kernel", ["BLOCK: 1024", "BLOCK: 256"])  # the rewrite is the config list
    settled = SettledTuners()
    with settled.side("parent"):
        tuning.run(parent, 4096, "parent")
    with settled.side("child", pin_to="parent"):
        assert tuning.run(child, 4096, "child") == "BLOCK: 256"
    assert settled.pinned == [] and settled.chosen("child") == {"max_kernel": {"(4096,)": "BLOCK: 256"}}


class _Database:
    """A library's tuning database (FlagGems's ConfigCache over SQLite): `in`, get and set, not a dict."""

    def __init__(self) -> None:
        self._rows: dict = {}

    def __contains__(self, key) -> bool:
        return key in self._rows

    def __getitem__(self, key):
        return self._rows[key]

    def __setitem__(self, key, config) -> None:
        self._rows[key] = config


def test_a_library_tuners_database_gives_way_to_a_dict_that_is_pinned(tuning):
    """Its choices were neither pinned nor reported while they lived in its database: FlagGems's matmul-vector and
    batched matmul tuned on both sides of every pair, 24-51 s of a 28-57 s timing job (H100)."""
    configs = ["BLOCK: 128", "BLOCK: 32"]
    parent, child = _tuner("k", configs), _tuner("k", configs)
    parent.cache, child.cache = _Database(), _Database()
    settled = SettledTuners()
    with settled.side("parent"):
        assert tuning.run(parent, 1, "parent") == configs[0]
    with settled.side("child", pin_to="parent"):
        assert tuning.run(child, 1, "child") == configs[0]  # pinned: its own pick would be the last
    assert isinstance(parent.cache, dict) and isinstance(child.cache, dict)
    assert settled.pinned == ["k"]
    assert settled.chosen("parent") == settled.chosen("child") == {"k": {"(1,)": configs[0]}}


def test_a_side_given_choices_runs_them_without_tuning(tuning):
    """The parent runs the choice its program was timed with before (its profile, or the pair that kept it); a
    key it was not given, or a given config it does not have, is tuned; the child is pinned to what the parent
    ran."""
    configs = ["BLOCK: 128, num_warps: 8", "BLOCK: 32, num_warps: 2"]
    parent, child, other = _tuner("max_kernel", configs), _tuner("max_kernel", configs), _tuner("sum_kernel", configs)
    given = {"max_kernel": {"(4096,)": configs[1]}, "sum_kernel": {"(4096,)": "BLOCK: 7"}}
    settled = SettledTuners()
    with settled.side("parent", choices=given):
        assert tuning.run(parent, 4096, "parent") == configs[1]  # given: its own pick would be the first
        assert tuning.run(parent, 8192, "parent") == configs[0]  # a key not given: tuned
        assert tuning.run(other, 4096, "parent") == configs[0]  # a config it does not have: tuned
    with settled.side("child", pin_to="parent"):
        assert tuning.run(child, 4096, "child") == configs[1]
    assert settled.given == ["max_kernel"] and settled.pinned == ["max_kernel"]
    assert settled.chosen("parent")["max_kernel"] == {"(4096,)": configs[1], "(8192,)": configs[0]}


def test_given_choices_and_a_real_autotuner(monkeypatch):
    """Through Triton's own Autotuner.run: the given key's text matches the key the tuner computes, and the config
    is launched without a benchmark (any benchmark here fails the test)."""
    import triton
    import triton.language as tl
    from triton.runtime.autotuner import Autotuner

    configs = [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})]

    @triton.autotune(configs=configs, key=["n"])
    @triton.jit
    def add_one(x_ptr, n, BLOCK: tl.constexpr):
        pass

    launched: list = []
    monkeypatch.setattr(add_one.fn, "run", lambda *args, **kwargs: launched.append(kwargs["BLOCK"]))
    monkeypatch.setattr(Autotuner, "_bench", lambda *a, **k: pytest.fail("benchmarked a given choice"))
    settled = SettledTuners()
    with settled.side("parent", choices={"add_one": {"(100,)": str(configs[2])}}):
        add_one.run(None, 100, grid=(1,), warmup=False)
    assert launched == [64] and settled.given == ["add_one"]
    assert settled.chosen("parent") == {"add_one": {"(100,)": str(configs[2])}}


def test_a_tuner_without_a_name_or_a_cache_runs_as_it_would(tuning):
    """A library's autotuner subclass may set neither (its own __init__): the side gives it a dict, reports it under
    its class's name, and the program's call goes on."""
    from triton.runtime.autotuner import Autotuner

    class Bare(Autotuner):
        def __init__(self):  # no base_fn, no cache: nothing of Triton's __init__
            self.configs = ["BLOCK: 32", "BLOCK: 64"]

    bare = Bare()
    settled = SettledTuners()
    with settled.side("parent", choices={"Bare": {"(1,)": "BLOCK: 64"}}):
        assert tuning.run(bare, 1, "parent") == "BLOCK: 64"
    assert settled.given == ["Bare"] and settled.chosen("parent") == {"Bare": {"(1,)": "BLOCK: 64"}}
