"""Whether a server target can run a scope point's dtype.

An in-process factory is told the point's dtype (``dtype=``, `fasttrack.targets.python.factory`).
A server is one process started from its command and environment: it serves the dtype those say.
With one dtype in the scope, that is the dtype the manifest's serve args state (the author's
statement, as for every other setting of the server). With several, a server serves a point's
dtype only when its start changes with it (a ``{dtype}`` placeholder in the command or the
environment, or a serving config that renders one): otherwise the same server would answer for
every dtype and nothing says which one it is, so the point cannot run (fail closed: the plan's
``target`` reason, never a pass at an unknown format).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fasttrack.targets.protocol import SIDES, SpecMaker

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest


def unservable_dtype(spec_of: SpecMaker, manifest: Manifest, point: Mapping[str, Any] | None) -> str | None:
    """Why the servers ``spec_of`` starts cannot run ``point``'s dtype, or None (no dtype on the
    point, one dtype in the scope, or a server that starts differently per dtype)."""
    dtype = (point or {}).get("dtype")
    declared = tuple(manifest.scope.dtypes)
    if dtype is None or len(declared) < 2:
        return None
    from fasttrack.targets.pool import spec_key  # here: the pool imports the openai kind, which imports this

    for side in SIDES:
        try:
            starts = {spec_key(spec_of(manifest, side, {**dict(point or {}), "dtype": d}, None)) for d in declared}
        except Exception:  # a server that cannot be specified at all: the check reports it
            return None
        if len(starts) < len(declared):
            return (
                f"the {side} server starts the same way at every dtype the scope declares "
                f"({', '.join(declared)}), so it serves one of them for all and nothing says which "
                "(a server's dtype is what its serve args say: declare that one in scope.dtypes)"
            )
    return None
