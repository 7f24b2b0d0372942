"""SGLang servers (``target.kind: sglang``): the manifest's SGLang launch command
(`fasttrack.manifest.sglang_launch`) started as one server per side per scope point, shared by
every check there (`fasttrack.targets.pool`), through the same server machinery as the ``openai``
and ``vllm`` kinds (`fasttrack.targets.openai.server`: guard, ``/health`` wait, log, stop)."""

from functools import partial

from fasttrack.targets.dtypes import unservable_dtype
from fasttrack.targets.protocol import TargetSpec
from fasttrack.targets.sglang.side import open_sglang, server_spec, unavailable

KIND = TargetSpec(
    name="sglang",
    startup_s=60.0,
    open=open_sglang,
    unavailable=unavailable,
    shared_server=server_spec,
    unservable=partial(unservable_dtype, server_spec),
)
