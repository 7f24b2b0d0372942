"""A server side's proof counters, read from its ``/metrics``: the switch proof's and the
benchmarks' census proof's witness of which path the server's decode steps took."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fasttrack.errors import TargetError
from fasttrack.kinds.switch.counters import Counts, parse_metric

if TYPE_CHECKING:
    from fasttrack.manifest.sections import SwitchProof
    from fasttrack.targets.protocol import OpenedSide


class MetricsScraper:
    """A server side as the proof needs it: generate, and every proof counter by its label."""

    def __init__(self, opened: OpenedSide, proofs: Sequence[SwitchProof]) -> None:
        self.opened, self.proofs = opened, list(proofs)

    def generate(self, requests: list[dict[str, Any]]) -> Any:
        return self.opened.target.generate(requests)

    def snapshot(self) -> Counts:
        import httpx

        from fasttrack.targets.http import send

        timeout = getattr(self.opened.target, "timeout_s", 30.0)
        texts: dict[str, str] = {}
        counts: Counts = {}
        for proof in self.proofs:
            path = proof.metrics_path
            url = f"{self.opened.url}{path}"
            if url not in texts:
                try:
                    response = send("GET", path, functools.partial(httpx.get, url, timeout=timeout))
                except httpx.HTTPError as err:
                    raise TargetError(f"{self.opened.name}: cannot read {url}: {err}") from err
                if response.status_code != 200:  # never read counts out of an error page
                    raise TargetError(f"{self.opened.name}: {url} answered HTTP {response.status_code}")
                texts[url] = response.text
            label = proof.label or "path"
            counts[f"{proof.metric}{{{label}}}"] = parse_metric(texts[url], str(proof.metric), label)
        return counts
