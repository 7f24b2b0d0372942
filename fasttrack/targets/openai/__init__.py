"""OpenAI-compatible HTTP server targets (``target.kind: openai``): how a side's server is started
and stopped (`server`), the client the checks talk to (`client`), and opening a side (`side`)."""

from fasttrack.targets.openai.side import open_server, unavailable
from fasttrack.targets.protocol import TargetSpec

KIND = TargetSpec(name="openai", startup_s=30.0, open=open_server, unavailable=unavailable)
