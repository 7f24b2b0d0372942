"""Write evidence while a run goes on: the engine hands over each new (immutable) snapshot; a
background thread writes the latest one atomically, at most every ``interval`` seconds. So a
hard kill loses at most ``interval`` seconds of outcomes, even while the engine sits in a long
check, and a burst of instantaneous outcomes (per-point views of one pytest run) does not
rewrite the file hundreds of times."""

from __future__ import annotations

import threading
from pathlib import Path

from fasttrack.evidence import Evidence, write_evidence


class EvidenceWriter:
    def __init__(self, path: Path, interval: float = 0.25):
        self.path = path
        self.interval = interval
        self.error: BaseException | None = None
        self.written: Evidence | None = None  # the last snapshot written whole
        self._latest: Evidence | None = None
        self._closed = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name="fasttrack-evidence-writer", daemon=True)
        self._thread.start()

    def submit(self, evidence: Evidence) -> None:
        with self._cond:
            self._latest = evidence
            self._cond.notify()

    def close(self) -> None:
        """Write what is pending and stop; the caller then writes the final evidence itself."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join()

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._latest is not None or self._closed)
                snapshot, self._latest = self._latest, None
                if snapshot is None:
                    return
            try:
                write_evidence(snapshot, self.path)
                self.written = snapshot
            except BaseException as err:  # reported by the engine at the end; the final write retries
                self.error = err
            with self._cond:
                self._cond.wait_for(lambda: self._closed, timeout=self.interval)
