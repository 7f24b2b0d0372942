"""A target kind that exists only in the tests: it proves that a target kind is one folder and one
registry line (CONTRIBUTING.md, "Adding a target kind"). Each side is an in-memory `Target` that
parrots its prompt; the candidate marks its path as the optimised one."""

from fasttrack.targets.protocol import TargetSpec
from support.parrot_target.side import open_parrot

KIND = TargetSpec(name="parrot", startup_s=0.1, open=open_parrot)
