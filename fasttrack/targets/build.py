"""The engine build the evidence was made with: version, commit, image digest.

Two sources, both recorded in the evidence (``engine_build``):

- a declared command (``target.engine_build.command``), run once before the checks in the
  repository root: its output is a JSON object (``version``, ``commit``, ``image_digest``) or
  text, from which a version (``0.11.1``), a git commit (40 hex digits, or vLLM's ``+g<sha>``
  suffix of dev versions) and an image digest (``sha256:<64 hex>``) are read;
- every server fasttrack starts or reaches: vLLM's ``GET /version`` (``{"version": ...}``), or
  SGLang's ``GET /get_server_info`` (whose ``version`` is SGLang's), per side, written beside the
  check's logs (``engine-build.<side>.json``) and gathered by the engine.

`fasttrack merge` refuses parts made with different builds (fasttrack.engine.merge).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

FIELDS = ("version", "commit", "image_digest")
BUILD_FILE = "engine-build.{side}.json"
_COMMIT = re.compile(r"\b[0-9a-f]{40}\b")
_DEV_COMMIT = re.compile(r"\+g([0-9a-f]{7,40})\b")
_DIGEST = re.compile(r"\bsha256:[0-9a-f]{64}\b")
_VERSION = re.compile(r"\b(\d+\.\d+(?:\.\d+)?(?:[.\-+][0-9A-Za-z.+\-]*)?)")
COMMAND_TIMEOUT_S = 120.0


def parse_build(text: str, source: str) -> dict[str, Any]:
    """{version, commit, image_digest, source} from a JSON object or free text (missing: None)."""
    build: dict[str, Any] = dict.fromkeys(FIELDS)
    stripped = text.strip()
    try:
        value = json.loads(stripped)
    except ValueError:
        value = None
    if isinstance(value, Mapping):
        build["version"] = _text(value.get("version"))
        build["commit"] = _text(value.get("commit") or value.get("git_commit") or value.get("sha"))
        build["image_digest"] = _text(value.get("image_digest") or value.get("digest"))
        stripped = build["version"] or ""
    else:
        digest = _DIGEST.search(stripped)
        build["image_digest"] = digest.group(0) if digest else None
        without = _DIGEST.sub(" ", stripped)
        commit = _COMMIT.search(without)
        build["commit"] = commit.group(0) if commit else None
        version = _VERSION.search(_COMMIT.sub(" ", without))
        build["version"] = version.group(1) if version else None
    if build["commit"] is None and build["version"]:
        dev = _DEV_COMMIT.search(str(build["version"]))
        build["commit"] = dev.group(1) if dev else None
    build["source"] = source
    return build


def _text(value: Any) -> str | None:
    return None if value is None else str(value).strip() or None


def from_command(command: Sequence[str], cwd: Path) -> dict[str, Any]:
    """Run the declared build command; a failure is recorded (``error``), never raised."""
    shown = " ".join(command)
    try:
        done = subprocess.run(
            list(command), cwd=cwd, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError) as err:
        return {**dict.fromkeys(FIELDS), "source": f"command: {shown}", "error": f"{type(err).__name__}: {err}"}
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-300:]
        return {**dict.fromkeys(FIELDS), "source": f"command: {shown}", "error": f"exit {done.returncode}: {tail}"}
    return parse_build(done.stdout, f"command: {shown}")


# Where a server says its build: vLLM's ``GET /version`` ({"version": ...}); SGLang's
# ``GET /get_server_info`` (its server args, scheduler info, internal states and "version").
BUILD_PATHS = ("/version", "/get_server_info")


def from_server(url: str) -> dict[str, Any] | None:
    """The build a running server reports (vLLM's ``/version``, else SGLang's
    ``/get_server_info``), or None when it reports none."""
    import httpx

    base = url.rstrip("/")
    for path in BUILD_PATHS:
        try:
            response = httpx.get(f"{base}{path}", timeout=5.0)
        except httpx.HTTPError:
            return None
        if response.status_code != 200:
            continue
        text = response.text
        if path != "/version":  # only its version: the rest is the server's configuration
            try:
                info = json.loads(text)
            except ValueError:
                continue
            text = json.dumps({"version": info.get("version")} if isinstance(info, Mapping) else {})
        build = parse_build(text, f"server: {base}{path}")
        if any(build[f] for f in FIELDS):
            return build
    return None


def write_side(log_dir: Path | None, side: str, build: Mapping[str, Any] | None) -> None:
    if log_dir is None or build is None:
        return
    Path(log_dir).mkdir(parents=True, exist_ok=True)
    (Path(log_dir) / BUILD_FILE.format(side=side)).write_text(json.dumps(dict(build)), encoding="utf-8")


def read_sides(folder: Path) -> dict[str, dict[str, Any]]:
    """The server builds a check recorded in its artifact folder, per side."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(Path(folder).glob(BUILD_FILE.format(side="*"))):
        try:
            found[path.name.split(".")[1]] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, IndexError):
            continue
    return found


def identity(build: Mapping[str, Any] | None) -> tuple[Any, ...] | None:
    """What makes two builds the same build (the source does not)."""
    if not build or not any(build.get(f) for f in FIELDS):
        return None
    return tuple(build.get(f) for f in FIELDS)


def describe(build: Mapping[str, Any] | None) -> str:
    if not build:
        return "not recorded"
    if build.get("error"):
        return f"unknown ({build['error']})"
    parts = [f"{f.replace('_', ' ')} {build[f]}" for f in FIELDS if build.get(f)]
    return ", ".join(parts) or "unknown"
