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


def test_a_tuner_with_its_own_database_is_left_to_tune(tuning):
    configs = ["BLOCK: 128", "BLOCK: 32"]
    parent, child = _tuner("k", configs), _tuner("k", configs)
    child.cache = SimpleNamespace()  # not a dict: a library's tuning database
    settled = SettledTuners()
    with settled.side("parent"):
        tuning.run(parent, 1, "parent")
    with settled.side("child", pin_to="parent"):
        settled._pin(child, [parent])
    assert settled.pinned == [] and settled.chosen("child") == {}
