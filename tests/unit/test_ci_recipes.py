"""The CI recipes in examples/ci/ and the root .pre-commit-hooks.yaml: they parse, name real
commands and options, and their fasttrack steps succeed in a sandbox repository that looks like a
PR carrying signed evidence (and fail once code changes after the evidence was made)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fasttrack.attest import attest
from fasttrack.cli import COMMANDS
from fasttrack.evidence import write_evidence
from support.planned_evidence import planned_evidence

ROOT = Path(__file__).resolve().parents[2]
CI = ROOT / "examples" / "ci"
KIMI = ROOT / "examples" / "kimi-k3-latency" / "fasttrack.yaml"
BIN = Path(sys.executable).parent


def load(path: Path):
    return yaml.safe_load(path.read_text())


def github() -> dict:
    return load(CI / "github-actions.yml")


def buildkite() -> dict:
    return load(CI / "buildkite-pipeline.yml")


def fasttrack_lines(script: str) -> list[str]:
    return [line.strip() for line in script.splitlines() if line.strip().startswith("fasttrack ")]


def all_fasttrack_lines() -> list[str]:
    lines = []
    for job in github()["jobs"].values():
        for step in job["steps"]:
            lines += fasttrack_lines(step.get("run", ""))
    for step in buildkite()["steps"]:
        for command in step["command"]:
            lines += fasttrack_lines(command)
    for hook in load(ROOT / ".pre-commit-hooks.yaml"):
        lines.append(hook["entry"])
    return lines


def run_cli(*args: str, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", **kw.pop("env", {})}
    return subprocess.run(list(args), capture_output=True, text=True, timeout=120, env=env, **kw)


def test_every_recipe_parses_with_the_expected_shape():
    gh = github()
    assert "pull_request" in gh["on"]
    verify_job = gh["jobs"]["verify-evidence"]
    assert verify_job["runs-on"] == "ubuntu-latest", "the required check must not need a GPU runner"
    assert all("uses" in s or "run" in s for job in gh["jobs"].values() for s in job["steps"])
    uploads = [
        s
        for job in gh["jobs"].values()
        for s in job["steps"]
        if s.get("uses", "").startswith("actions/upload-artifact")
    ]
    assert len(uploads) == 2 and all(s.get("if") == "always()" for s in uploads)
    bk = buildkite()
    assert [s["key"] for s in bk["steps"]] == ["fasttrack-verify", "fasttrack-gate"]
    hooks = {h["id"]: h for h in load(ROOT / ".pre-commit-hooks.yaml")}
    assert set(hooks) == {"fasttrack-validate", "fasttrack-diff-scope"}
    used = {h["id"] for repo in load(CI / "pre-commit-config.yaml")["repos"] for h in repo["hooks"]}
    assert used <= set(hooks)


def test_commands_and_options_exist():
    lines = all_fasttrack_lines()
    assert len(lines) >= 10
    helps: dict[str, str] = {}
    for line in lines:
        words = shlex.split(re.sub(r"\$\{\{[^}]*\}\}", "X", line).replace("$$", "$"))
        sub = words[1]
        assert sub in COMMANDS, line
        if sub not in helps:
            proc = run_cli("fasttrack", sub, "--help")
            if proc.returncode != 0 and "No such command" in proc.stderr:
                pytest.skip(f"`fasttrack {sub}` is not implemented in this checkout yet")
            helps[sub] = proc.stdout
        for option in (w.split("=")[0] for w in words[2:] if w.startswith("--")):
            assert option in helps[sub], f"{line}: {option} is not an option of fasttrack {sub}"


def test_validate_hook_runs_on_manifests():
    hook = next(h for h in load(ROOT / ".pre-commit-hooks.yaml") if h["id"] == "fasttrack-validate")
    pattern = re.compile(hook["files"])
    assert pattern.search("examples/kimi-k3-latency/fasttrack.yaml") and pattern.search("fasttrack.yml")
    assert not pattern.search("README.md") and not pattern.search("not_fasttrack.yaml.bak")
    proc = run_cli(*shlex.split(hook["entry"]), str(KIMI.relative_to(ROOT)), cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
    }
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env).stdout.strip()


@pytest.fixture
def pr_repo(tmp_path) -> Path:
    """A repository on a PR branch: model code changed, evidence for that code attested and signed."""
    if shutil.which("git") is None or shutil.which("ssh-keygen") is None:
        pytest.skip("needs git and ssh-keygen")
    repo = tmp_path / "repo"
    model_dir = repo / "vllm" / "model_executor" / "models" / "kimi_k3"
    model_dir.mkdir(parents=True)
    manifest = model_dir / "fasttrack.yaml"
    shutil.copy(KIMI, manifest)
    key = tmp_path / "gpu-lab-key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "lab", "-f", str(key)], check=True)
    pub = key.with_suffix(".pub").read_text().strip()
    for ci_dir in (".github", ".buildkite"):  # repository configuration, on the base branch
        (repo / ci_dir).mkdir()
        (repo / ci_dir / "fasttrack_allowed_signers").write_text(f'gpu-lab@example.org namespaces="fasttrack" {pub}\n')
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "update-ref", "refs/remotes/origin/main", "main")
    git(repo, "checkout", "-q", "-b", "pr")
    (model_dir / "attention.py").write_text("# latency path\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "latency path")
    head = git(repo, "rev-parse", "HEAD")
    ev = planned_evidence(manifest, head=head)  # as the GB300 lab's run of this manifest writes it
    evidence = repo / github()["env"]["EVIDENCE"]
    write_evidence(ev, evidence)
    attest(evidence, sign_key=key)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "evidence from the GB300 lab")
    return repo


def github_steps(job: str) -> list[str]:
    gh = github()
    return [
        s["run"].replace("${{ github.base_ref }}", "main")
        for s in gh["jobs"][job]["steps"]
        if "run" in s and "fasttrack " in s["run"] and "pip install" not in s["run"]
    ]


def run_script(repo: Path, script: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return run_cli("bash", "-eo", "pipefail", "-c", script, cwd=repo, env=env)


def test_github_verify_job_passes_on_a_pr_with_signed_evidence(pr_repo, tmp_path):
    gh = github()
    summary = tmp_path / "step_summary.md"
    env = {**gh["env"], "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    for script in github_steps("verify-evidence"):
        if "diff-scope" in script and run_cli("fasttrack", "diff-scope", "--help").returncode != 0:
            continue
        proc = run_script(pr_repo, script, env)
        assert proc.returncode == 0, f"{script}\n{proc.stdout}\n{proc.stderr}"
    assert (pr_repo / "fasttrack-report" / "report.html").is_file()
    assert (pr_repo / "fasttrack-report" / "junit.xml").is_file()
    assert "fasttrack: PASS" in summary.read_text()


def test_github_verify_step_fails_when_code_changes_after_the_evidence(pr_repo):
    (pr_repo / "vllm" / "model_executor" / "models" / "kimi_k3" / "attention.py").write_text("# changed later\n")
    git(pr_repo, "commit", "-q", "-am", "untested change")
    script = next(s for s in github_steps("verify-evidence") if "fasttrack verify" in s)
    proc = run_script(pr_repo, script, github()["env"])
    assert proc.returncode == 1
    assert "not verified: head commit" in proc.stderr


def test_buildkite_verify_step_passes(pr_repo):
    bk = buildkite()
    step = next(s for s in bk["steps"] if s["key"] == "fasttrack-verify")
    env = {**bk["env"], "BUILDKITE_PULL_REQUEST_BASE_BRANCH": "main"}
    for command in step["command"]:
        if "pip install" in command or (
            "diff-scope" in command and run_cli("fasttrack", "diff-scope", "--help").returncode != 0
        ):
            continue
        proc = run_script(pr_repo, command.replace("$$", "$"), env)
        assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
    assert (pr_repo / "fasttrack-report" / "junit.xml").is_file()
