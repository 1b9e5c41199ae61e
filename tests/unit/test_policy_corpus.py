"""Nothing honest is refused: the static policy, judging as untrusted, finds nothing in the bundled examples, the
held-out naive programs and the adversarial corpus's honest controls; and it refuses the adversarial programs
whose cheat lies in what they import or read (the others are left to the run-time gates)."""

import pytest

from klineage.cli.gate_commands import bundled_examples
from klineage.policy import judge_program
from klineage.program import load_program
from klineage.suites import suite_instances
from tests.adversarial.manifest import CASES, CONTROLS, ROOT, TRUSTED_ONLY_CONTROLS

HONEST = [
    *(program for _, program in bundled_examples()),
    *(naive for _, naive in suite_instances("heldout")),
    *(ROOT / program for program, _ in CONTROLS if program not in TRUSTED_ONLY_CONTROLS),
]

# the adversarial programs the policy refuses before they run, with a rule each must break
REFUSED = {
    "background_executor.py": "import",  # concurrent.futures
    "background_thread.py": "import",  # threading
    "background_thread_joined.py": "import",
    "ghost_numpy.py": "host_transfer",  # .numpy()
    "lazy_subclass.py": "class_base",  # a torch.Tensor subclass
    "lying_subclass.py": "dunder_def",  # __torch_function__
    "numpy_inplace.py": "host_transfer",
    "reference_model_reuse.py": "import",  # sys.modules
    "reference_theft.py": "import",  # gc
    "torch_compute_obfuscated.py": "computed_attribute",  # getattr(torch, 'a' + 'dd')
}


def test_the_honest_corpora_are_all_there():
    assert len(HONEST) == 13 + 22 + 5


@pytest.mark.parametrize("program", sorted(TRUSTED_ONLY_CONTROLS))
def test_a_trusted_only_control_is_refused_as_a_models_program(program):
    """Its exclusion above is true: the policy refuses it, by the rule named."""
    report = judge_program(load_program(ROOT / program).written_by("unchecked"))
    assert report.refused and "torch.library" in " ".join(str(f) for f in report.findings)


@pytest.mark.parametrize("path", HONEST, ids=[f"{p.parent.name}/{p.name}" for p in HONEST])
def test_an_honest_program_passes_the_policy(path):
    report = judge_program(load_program(path).written_by("unchecked"))
    assert not report.refused, [str(f) for f in report.findings]


@pytest.mark.parametrize("name, rule", sorted(REFUSED.items()), ids=sorted(REFUSED))
def test_the_policy_refuses_what_it_can_see_of_the_adversarial_corpus(name, rule):
    """Listed by name, not over CASES: attacks added to the corpus later may be refused or left to the gates."""
    (case,) = [c for c in CASES if c.program == f"programs/{name}"]
    report = judge_program(load_program(ROOT / case.program).written_by("unchecked"))
    assert rule in {f.rule for f in report.findings}, [str(f) for f in report.findings]


def test_a_program_written_the_way_a_model_writes_one_passes():
    from tests.conftest import ROOT as REPO

    program = load_program(REPO / "tests" / "fixtures" / "policy" / "model_style.py").written_by("model")
    report = judge_program(program)
    assert report.judged == ("program",) and not report.refused, [str(f) for f in report.findings]
