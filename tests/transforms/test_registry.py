"""Every registered transform is complete: metadata, a docstring stating intent, conditions and failure, a
condition vocabulary drawn from CONDITIONS, and a fixture test module with before/after and round-trip tests."""

from pathlib import Path

import pytest

from klineage.transform import CONDITIONS, TRANSFORMS, Transform, load_families

load_families()
HERE = Path(__file__).parent
IDS = sorted(TRANSFORMS)


def test_registry_is_populated():
    assert len(TRANSFORMS) >= 1


@pytest.mark.parametrize("tid", IDS)
def test_transform_is_complete(tid):
    cls = TRANSFORMS[tid]
    assert issubclass(cls, Transform)
    assert cls.id == tid and cls.tag in ("M", "S") and 1 <= cls.family <= 30 and cls.cost >= 1
    assert cls.intent and cls.conditions
    assert set(cls.conditions) <= set(CONDITIONS), set(cls.conditions) - set(CONDITIONS)
    doc = cls.__doc__ or ""
    for section in ("Intent:", "Conditions:", "Failure:"):
        assert section in doc, f"{tid} docstring lacks {section}"
    tests = HERE / f"test_{tid}.py"
    assert tests.is_file(), f"{tid} has no fixture tests ({tests.name})"
    text = tests.read_text()
    assert "def test_round_trip" in text and "def test_simplify" in text and "def test_optimize" in text
