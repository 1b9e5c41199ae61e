"""Where candidates come from: each method's proposer turns the current program into candidates, best first.

- `SkillProposer` (KLineage, skill.py): the library's optimization skills, their conditions decided on the domain,
  the expert's parameters carried over (params.py) and a small neighbourhood searched, ordered by measured effect;
  what a run measured steers the rest of it (measured.py).
- `BlindProposer` (blind.py): the same transform catalog with default parameters, no conditions, no effects.
- `MemoryProposer` (memory.py): a knowledge base of past outcomes (program features -> transform, parameters ->
  observed speedup), retrieved by feature similarity, no conditions (a KernelBlaster/KernelSkill-style baseline).
- `AutotuneProposer` (autotune.py): launch configuration only (tile sizes, warps, stages).

base.py holds what they share: Candidate, Refusal, and Proposer with the launch-configuration search and the hooks
optimize calls. A family's own rules are the family's (klineage.transform's hooks): no proposer names one."""

from klineage.features import features, similarity
from klineage.proposers.autotune import AutotuneProposer
from klineage.proposers.base import LAUNCH_CONFIG, Candidate, Proposer, Refusal, launched_kernel
from klineage.proposers.blind import BlindProposer
from klineage.proposers.memory import (
    MemoryEntry,
    MemoryProposer,
    append_memory,
    load_memory,
    memory_base,
    memory_entries,
    memory_path,
    remember,
    remember_attempts,
    write_memory,
)
from klineage.proposers.params import adapt, expert_tiles, numeric_neighbours, visible_code
from klineage.proposers.skill import Screening, SkillProposer, screen

__all__ = [
    "LAUNCH_CONFIG",
    "AutotuneProposer",
    "BlindProposer",
    "Candidate",
    "MemoryEntry",
    "MemoryProposer",
    "Proposer",
    "Refusal",
    "Screening",
    "SkillProposer",
    "adapt",
    "append_memory",
    "expert_tiles",
    "features",
    "launched_kernel",
    "load_memory",
    "memory_base",
    "memory_entries",
    "memory_path",
    "numeric_neighbours",
    "remember",
    "remember_attempts",
    "screen",
    "similarity",
    "visible_code",
    "write_memory",
]
