"""Dependency builds besides the engine's (issue #36 item 9): read from the installed
distribution (version, and a commit from direct_url.json, the package's files or its version)
or a declared command; recorded in the evidence, shown under Provenance, compared by merge; a
requirement the build does not meet makes every check that runs code not_run(dependency)."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from fasttrack.engine.merge import merge_evidence
from fasttrack.environment import Accelerator, Environment
from fasttrack.errors import UsageError
from fasttrack.kinds.registry import KINDS
from fasttrack.manifest import load_manifest
from fasttrack.manifest.sections import Dependency
from fasttrack.plan import build_plan
from fasttrack.targets.dependencies import dependency_record, read_build, unmet, with_dependencies
from support import evidence_fixtures

REPO = Path(__file__).resolve().parents[3]
FIXTURE = REPO / "tests/fixtures/manifests/valid/dependency-builds.yaml"
SHA = "0123456789abcdef0123456789abcdef01234567"


def install(site: Path, dist: str, version: str, files: dict[str, str] | None = None, **meta: str) -> Path:
    """A distribution as pip leaves it in site-packages: its .dist-info and its package."""
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    for name, text in meta.items():
        (info / name.replace("__", ".")).write_text(text)
    for path, text in (files or {}).items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(text)
    return site


def test_version_and_a_commit_the_package_states_in_its_files(tmp_path):
    site = install(
        tmp_path,
        "flashinfer-python",
        "0.3.1",
        {
            "flashinfer/__init__.py": "",
            "flashinfer/_build_meta.py": f'__version__ = "0.3.1"\n__git_version__ = "{SHA}"\n',
        },
        top_level__txt="flashinfer\n",
    )
    build = read_build(Dependency("flashinfer-python", ">=0.3"), tmp_path, [str(site)])
    assert (build["version"], build["commit"]) == ("0.3.1", SHA)
    assert build["source"] == "importlib.metadata: flashinfer-python 0.3.1; commit from flashinfer/_build_meta.py"


def test_a_commit_from_direct_url_or_from_the_version(tmp_path):
    vcs = json.dumps({"url": "https://github.com/ROCm/aiter", "vcs_info": {"vcs": "git", "commit_id": SHA}})
    install(tmp_path / "a", "amd-aiter", "0.1.5", direct_url__json=vcs)
    assert read_build(Dependency("amd-aiter"), tmp_path, [str(tmp_path / "a")])["commit"] == SHA
    install(tmp_path / "b", "amd-aiter", "0.1.5.dev38+g9f9e1a2")
    build = read_build(Dependency("amd-aiter"), tmp_path, [str(tmp_path / "b")])
    assert build["commit"] == "9f9e1a2" and build["source"].endswith("; commit from its version")


def test_a_build_that_is_not_installed_is_recorded_and_fails_a_requirement(tmp_path):
    build = read_build(Dependency("nvidia-nvshmem-cu12"), tmp_path, [str(tmp_path)])
    assert build["version"] is None and "is not installed" in build["source"]
    assert unmet(Dependency("nvidia-nvshmem-cu12"), build) is None  # named to be recorded only
    assert unmet(Dependency("nvidia-nvshmem-cu12", ">=3.3"), build) == "it is not installed here"


def test_a_declared_command_reads_a_build_outside_this_interpreter(tmp_path):
    command = (sys.executable, "-c", f"import json; print(json.dumps({{'version': '0.1.4', 'commit': '{SHA}'}}))")
    build = read_build(Dependency("amd-aiter", command=command), tmp_path)
    assert (build["version"], build["commit"]) == ("0.1.4", SHA) and build["source"].startswith("command: ")
    failed = read_build(Dependency("amd-aiter", command=(sys.executable, "-c", "raise SystemExit(3)")), tmp_path)
    assert unmet(Dependency("amd-aiter", "==0.1.4"), failed).startswith("its build could not be read (exit 3")


@pytest.mark.parametrize(
    ("version", "commit", "build", "why"),
    [
        (">=0.3", None, {"version": "0.3.1"}, None),
        (">=0.3", None, {"version": "0.3.1.dev4+g0123456"}, None),
        (">=0.3", None, {"version": "0.2.14"}, "installed here: 0.2.14"),
        (">=0.3,<0.4", None, {"version": "0.4.0"}, "installed here: 0.4.0"),
        (None, "0123456", {"version": "0.3.1", "commit": SHA}, None),
        (None, SHA, {"version": "0.3.1", "commit": "0123456"}, None),
        (None, "89abcde", {"version": "0.3.1", "commit": SHA}, f"installed here: commit {SHA}"),
        (None, "0123456", {"version": "0.3.1", "commit": None}, "installed here: 0.3.1, with no commit to compare"),
    ],
)
def test_what_a_requirement_accepts(version, commit, build, why):
    assert unmet(Dependency("flashinfer-python", version, commit), build) == why


def b200(builds: dict) -> Environment:
    gpus = tuple(Accelerator(i, "NVIDIA B200", None, "10.0") for i in range(8))
    return Environment("NVIDIA B200", gpus, "test", "nvlink", "cpu", 64, "Linux", "3.11", dependencies=builds)


def test_an_unmet_requirement_makes_every_check_that_runs_code_not_run_with_the_reason():
    manifest = load_manifest(FIXTURE)
    plan = build_plan(manifest, b200({"flashinfer-python": {"version": "0.2.14", "commit": None}}), KINDS)
    runs_code = [i for i in plan.instances if i.scope_point is not None]
    assert runs_code and {i.reason_code for i in runs_code} == {"dependency"}
    assert {i.reason for i in runs_code} == {
        "needs flashinfer-python >=0.3 (target.dependencies[0]); installed here: 0.2.14"
    }
    assert {i.needs for i in runs_code} == {"flashinfer-python >=0.3"}
    scope_diff = next(i for i in plan.instances if i.kind == "scope_diff")
    assert scope_diff.reason_code != "dependency"  # reads code, runs none
    met = build_plan(manifest, b200({"flashinfer-python": {"version": "0.3.1", "commit": None}}), KINDS)
    assert not any("flashinfer" in (i.reason or "") for i in met.instances)
    assert json.loads(json.dumps(met.to_dict()))["dependencies"]["flashinfer-python"]["version"] == "0.3.1"


def test_the_evidence_record_names_the_requirement_and_why_it_is_unmet():
    manifest = load_manifest(FIXTURE)
    record = dependency_record(manifest, {"flashinfer-python": {"version": "0.2.14", "commit": None, "source": "s"}})
    assert record["flashinfer-python"] == {
        "version": "0.2.14",
        "commit": None,
        "source": "s",
        "required": ">=0.3",
        "unmet": "installed here: 0.2.14",
    }
    assert record["nvidia-nvshmem-cu12"]["source"] == "not read" and "required" not in record["nvidia-nvshmem-cu12"]
    assert set(record) == {"flashinfer-python", "nvidia-nvshmem-cu12", "amd-aiter"}


def test_with_dependencies_reads_each_declared_build(tmp_path):
    site = install(tmp_path, "flashinfer-python", "0.3.1")
    env = Environment("cpu", (), "test", "loopback", "cpu", 2, "Linux", "3.11")
    manifest = load_manifest(FIXTURE)
    deps = replace(manifest.target, dependencies=manifest.target.dependencies[:2])
    found = with_dependencies(env, replace(manifest, target=deps), [str(site)]).dependencies
    assert found["flashinfer-python"]["version"] == "0.3.1" and found["nvidia-nvshmem-cu12"]["version"] is None
    assert "dependencies" not in env.to_dict()  # the evidence records them apart


def test_merge_refuses_parts_made_with_different_dependency_builds():
    first = evidence_fixtures.build_evidence("kimi-k3-latency", "pass")
    a = replace(first, dependencies={"flashinfer-python": {"version": "0.3.1", "commit": SHA, "source": "s"}})
    b = replace(
        a, run=replace(a.run, id="other"), dependencies={"flashinfer-python": {"version": "0.3.0", "commit": None}}
    )
    with pytest.raises(UsageError, match=r"different builds of flashinfer-python \(version 0.3.1, commit"):
        merge_evidence([a, b])
    absent = replace(a, run=replace(a.run, id="cpu"), dependencies={"flashinfer-python": {"version": None}})
    merged = merge_evidence([absent, a])  # a part where it is not installed conflicts with none
    assert merged.dependencies["flashinfer-python"]["version"] == "0.3.1"
    assert merge_evidence([a, replace(a, run=replace(a.run, id="x"), dependencies=None)]).dependencies


def test_the_report_shows_each_build_and_an_unmet_requirement_under_provenance():
    from fasttrack.report.html import render_html

    evidence = evidence_fixtures.build_evidence("kimi-k3-latency", "pass").to_dict()
    evidence["dependencies"] = {
        "flashinfer-python": {
            "version": "0.2.14",
            "commit": SHA,
            "source": "importlib.metadata: x",
            "required": ">=0.3",
            "unmet": "installed here: 0.2.14",
        },
        "nvidia-nvshmem-cu12": {"version": None, "commit": None, "source": "importlib.metadata: not installed"},
    }
    html = render_html(evidence, "0" * 64, kinds=KINDS)
    assert (
        f"dependency flashinfer-python</dt><dd>version 0.2.14, commit {SHA} · requires &gt;=0.3: NOT MET, installed here: 0.2.14"
        in html
    )
    assert "dependency nvidia-nvshmem-cu12</dt><dd>not installed" in html


def test_evidence_keeps_the_builds_through_a_round_trip_and_the_schema_accepts_them(tmp_path):
    from fasttrack.evidence import read_evidence, write_evidence

    record = {"flashinfer-python": {"version": "0.3.1", "commit": SHA, "source": "s", "required": ">=0.3"}}
    ev = replace(evidence_fixtures.build_evidence("kimi-k3-latency", "pass"), dependencies=record)
    write_evidence(ev, tmp_path / "evidence.json")
    assert read_evidence(tmp_path / "evidence.json", KINDS).dependencies == record


def test_a_check_run_records_the_builds_and_fails_closed(tmp_path):
    from fasttrack.engine.run import CheckOptions, run_check
    from fasttrack.selection import Selection
    from support.projects import git, materialise

    project = materialise(tmp_path / "toy")
    manifest = project / "fasttrack.yaml"
    old = '  python: {factory: "toy.target:create", path: "."}'
    dep = f"  dependencies: [{{name: toy-kernels, version: '>=2', command: [{sys.executable}, -c, \"print('toy-kernels 1.0')\"]}}]"
    manifest.write_text(manifest.read_text().replace(old, f"{old}\n{dep}"))
    git(project, "commit", "-qam", "declare a dependency")
    options = CheckOptions(
        str(manifest), tmp_path / "out", selection=Selection(only=("scope_diff", "switch")), quiet=True
    )
    evidence = run_check(options, KINDS).evidence
    assert evidence.dependencies["toy-kernels"]["version"] == "1.0"
    assert evidence.dependencies["toy-kernels"]["unmet"] == "installed here: 1.0"
    switch = [o for o in evidence.checks if o.kind == "switch"]
    assert switch and {(o.status.value, o.reason_code) for o in switch} == {("not_run", "dependency")}
    assert all("needs toy-kernels >=2 (target.dependencies[0]); installed here: 1.0" in o.reason for o in switch)


def test_resume_reuses_no_outcome_measured_on_another_build():
    from fasttrack.engine.setup import code_identity_of

    manifest = load_manifest(FIXTURE)
    one = code_identity_of(manifest, "head", {"flashinfer-python": {"version": "0.3.1", "commit": None}})
    other = code_identity_of(manifest, "head", {"flashinfer-python": {"version": "0.3.2", "commit": None}})
    assert one != other
    assert code_identity_of(manifest, "head", {}) == code_identity_of(manifest, "head")  # none named: as before
