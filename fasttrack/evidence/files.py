"""Evidence files: written atomically with their digest sidecar, read with the size and nesting
caps, parsed and validated against the evidence schema (whose kind enum the schema generator
takes from the kinds registry, `fasttrack.resources.evidence_schema`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fasttrack.errors import EvidenceError
from fasttrack.evidence.artifacts import artifact_path_problems
from fasttrack.evidence.model import Evidence, canonical_bytes
from fasttrack.fileio import EVIDENCE_MAX_BYTES, InputTooLarge, TooDeep, atomic_write_all, check_json_depth, read_capped


def sidecar_paths(evidence_path: Path) -> tuple[Path, Path, Path]:
    """(digest sidecar, in-toto statement, its signature) beside ``evidence_path``:
    ``evidence.json.sha256``, ``attestation.intoto.json`` (``NAME.intoto.json`` for ``NAME.json``),
    ``attestation.intoto.json.sig``."""
    evidence = Path(evidence_path)
    stem = "attestation" if evidence.name == "evidence.json" else evidence.name.removesuffix(".json")
    statement = evidence.with_name(f"{stem}.intoto.json")
    return evidence.with_name(evidence.name + ".sha256"), statement, statement.with_name(statement.name + ".sig")


def write_evidence(evidence: Evidence, path: Path) -> str:
    """Write the evidence and its digest sidecar atomically, together (fileio.atomic_write_all:
    a crash or a full disk leaves the previous pair intact, never a truncated or mismatched one).
    An attestation of the evidence this replaces no longer holds: it is removed (`fasttrack
    attest` or the reports of `check` write a new one). Returns the digest; WriteFailed (an
    OSError naming the file) when the disk is full or the folder unwritable."""
    path = Path(path)
    data = canonical_bytes(evidence.to_dict())
    digest = hashlib.sha256(data).hexdigest()
    sidecar, statement, signature = sidecar_paths(path)
    atomic_write_all([(path, data), (sidecar, f"{digest}  {path.name}\n".encode())])
    for stale in (signature, statement):
        try:
            stale.unlink(missing_ok=True)
        except OSError:
            pass
    return digest


def read_evidence_bytes(path: Path) -> bytes:
    """The bytes of an evidence file (or of ``DIR/evidence.json``), read with the size cap."""
    path = Path(path)
    if path.is_dir():
        path = path / "evidence.json"
    try:
        return read_capped(path, EVIDENCE_MAX_BYTES)
    except FileNotFoundError:
        raise EvidenceError(f"{path}: evidence file not found") from None
    except InputTooLarge as err:
        raise EvidenceError(f"{path}: the evidence file is {err}") from None
    except OSError as err:
        raise EvidenceError(f"{path}: cannot read evidence: {err.strerror or err}") from None


def parse_evidence(
    raw: bytes, source: str, *, validate: bool = True, kinds: Iterable[str] | None = None
) -> dict[str, Any]:
    """Evidence from its bytes: nesting checked before parsing, then JSON, then the schema (its
    kind enum: ``kinds``, the registry's kind names; None: the shipped schema's)."""
    try:
        check_json_depth(raw)
    except TooDeep as err:
        raise EvidenceError(f"{source}:{err.line}: evidence is not valid: {err}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        line = getattr(err, "lineno", None) or raw[: getattr(err, "start", 0)].count(b"\n") + 1
        raise EvidenceError(f"{source}:{line}: evidence is not valid JSON: {err}") from None
    if validate:
        validate_evidence_dict(data, source, kinds)
    return data


def read_evidence_dict(path: Path, *, validate: bool = True, kinds: Iterable[str] | None = None) -> dict[str, Any]:
    """Read and (by default) schema-validate evidence; raises EvidenceError with a clear message."""
    path = Path(path)
    if path.is_dir():
        path = path / "evidence.json"
    return parse_evidence(read_evidence_bytes(path), str(path), validate=validate, kinds=kinds)


def read_evidence(path: Path, kinds: Iterable[str] | None = None) -> Evidence:
    return Evidence.from_dict(read_evidence_dict(path, kinds=kinds))


def validate_evidence_dict(data: Any, source: str = "evidence", kinds: Iterable[str] | None = None) -> None:
    """Validate against the evidence schema (schemas/evidence.schema.json; with ``kinds``, its
    kind enum those kinds); raise EvidenceError listing every problem."""
    from jsonschema import Draft202012Validator

    from fasttrack.resources import evidence_schema, load_schema

    validator = Draft202012Validator(load_schema("evidence") if kinds is None else evidence_schema(kinds))
    problems = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if problems:
        lines = [f"{source}: {_json_path(e.absolute_path)}: {e.message}" for e in problems[:20]]
        more = f"\n... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise EvidenceError("evidence does not match the evidence schema:\n" + "\n".join(lines) + more)
    # Confinement is checked on every read: a path that leaves the folder is never opened or copied.
    leaving = artifact_path_problems(data)
    if leaving:
        raise EvidenceError(f"{source}: evidence is not valid: " + "; ".join(leaving[:5]))


def file_digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _json_path(parts: Iterable[Any]) -> str:
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out
