"""In-process targets (``target.kind: python``): a factory called once per side (`factory`), its
environment switches (`env`), and the kernel census of a torch target (`census`)."""

from fasttrack.targets.protocol import TargetSpec
from fasttrack.targets.python.factory import open_in_process, unavailable

KIND = TargetSpec(name="python", startup_s=5.0, open=open_in_process, unavailable=unavailable)
