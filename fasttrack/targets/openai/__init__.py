"""OpenAI-compatible HTTP server targets (``target.kind: openai``): how a side's server is started
and stopped (`server`), the client the checks talk to (`client`), and opening a side (`side`)."""

from functools import partial

from fasttrack.targets.dtypes import unservable_dtype
from fasttrack.targets.openai.side import open_server, server_spec, unavailable
from fasttrack.targets.protocol import TargetSpec

KIND = TargetSpec(
    name="openai",
    startup_s=30.0,
    open=open_server,
    unavailable=unavailable,
    unservable=partial(unservable_dtype, server_spec),
)
