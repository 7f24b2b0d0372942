"""vLLM servers (``target.kind: vllm``): the manifest's vLLM serving config (`fasttrack.manifest.
vllm_serve`) started as one server per side per scope point, shared by every check there
(`fasttrack.targets.pool`); `side` opens a side with or without the run's pool."""

from functools import partial

from fasttrack.targets.dtypes import unservable_dtype
from fasttrack.targets.protocol import TargetSpec
from fasttrack.targets.vllm.side import open_vllm, server_spec, unavailable

KIND = TargetSpec(
    name="vllm",
    startup_s=30.0,
    open=open_vllm,
    unavailable=unavailable,
    shared_server=server_spec,
    unservable=partial(unservable_dtype, server_spec),
)
