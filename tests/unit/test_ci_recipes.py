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
        for command in step.get("command", ()):
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
    assert len(uploads) == 3 and all(s.get("if") == "always()" for s in uploads)
    assert gh["jobs"]["merge"]["needs"] == "gate" and len(gh["jobs"]["gate"]["strategy"]["matrix"]["shard"]) >= 2
    bk = buildkite()
    assert [s.get("key", "wait" if "wait" in s else None) for s in bk["steps"]] == [
        "fasttrack-verify",
        "fasttrack-gate",
        "wait",
        "fasttrack-merge",
    ]
    assert bk["steps"][1]["parallelism"] >= 2
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


# ---------------------------------------------------------------------------------------------
# Scale-out: the recipes' gate shards and merge, run on a fake target, give the unsharded verdict


@pytest.fixture(scope="module")
def sharded_project(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """The toy fault project on a PR branch, and the outcome of every instance of one unsharded
    gate run over it: what every sharded recipe must reproduce."""
    if shutil.which("git") is None:
        pytest.skip("needs git")
    from support.projects import git as project_git
    from support.projects import materialise

    root = materialise(tmp_path_factory.mktemp("ci") / "toy")
    project_git(root, "update-ref", "refs/remotes/origin/main", "main")
    project_git(root, "checkout", "-q", "-b", "pr")
    kernel = root / "toy" / "kernel.py"
    kernel.write_text(kernel.read_text() + "\n# the PR's change\n")
    project_git(root, "commit", "-qam", "change")
    proc = run_cli(
        "fasttrack",
        "check",
        "fasttrack.yaml",
        "--base",
        "origin/main",
        "--policy-from",
        "origin/main",
        "--out",
        "unsharded",
        cwd=root,
    )
    assert proc.returncode in (0, 1, 3), proc.stdout + proc.stderr
    return root, outcomes(root / "unsharded")


def outcomes(folder: Path) -> dict[str, str]:
    import json

    evidence = json.loads((folder / "evidence.json").read_text())
    return {"verdict": evidence["verdict"]["status"], **{c["id"]: c["status"] for c in evidence["checks"]}}


def runnable_lines(commands: list[str]) -> list[str]:
    """The commands a test can run here: not installs, not the CI agent's own artifact transfer."""
    return [c for c in commands if "pip install" not in c and "buildkite-agent" not in c]


def test_buildkite_shards_with_parallelism_and_merges_in_a_following_step(sharded_project):
    root, expected = sharded_project
    bk = buildkite()
    gate = next(s for s in bk["steps"] if s.get("key") == "fasttrack-gate")
    merge = next(s for s in bk["steps"] if s.get("key") == "fasttrack-merge")
    steps = bk["steps"]
    assert steps.index(merge) > steps.index(gate) and any(
        "wait" in s for s in steps[steps.index(gate) : steps.index(merge)]
    )
    env = {"MANIFEST": "fasttrack.yaml", "BUILDKITE_PULL_REQUEST_BASE_BRANCH": "main"}
    count = int(gate["parallelism"])
    for job in range(count):  # Buildkite's BUILDKITE_PARALLEL_JOB is 0-based
        shard_env = {**env, "BUILDKITE_PARALLEL_JOB": str(job), "BUILDKITE_PARALLEL_JOB_COUNT": str(count)}
        for command in runnable_lines(gate["command"]):
            proc = run_script(root, command.replace("$$", "$"), shard_env)
            assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
    assert len(list(root.glob("fasttrack-out/shard-*/evidence.json"))) == count
    for command in runnable_lines(merge["command"]):
        proc = run_script(root, command.replace("$$", "$"), env)
        assert proc.returncode in (0, 1, 3), f"{command}\n{proc.stdout}\n{proc.stderr}"
    assert outcomes(root / "fasttrack-merged") == expected
    assert (root / "fasttrack-merged" / "evidence.json.sha256").exists() or list(
        root.glob("fasttrack-merged/*.intoto*")
    )


def test_github_actions_shards_with_a_matrix_and_merges_in_a_job_that_needs_them(sharded_project, tmp_path):
    root, expected = sharded_project
    project = tmp_path / "gh"
    shutil.copytree(root, project, ignore=shutil.ignore_patterns("fasttrack-out", "fasttrack-merged"))
    jobs = github()["jobs"]
    gate, merge = jobs["gate"], jobs["merge"]
    env = {"MANIFEST": "fasttrack.yaml", **{k: str(v) for k, v in gate.get("env", {}).items()}}
    for shard in gate["strategy"]["matrix"]["shard"]:
        for step in gate["steps"]:
            if "run" in step and "pip install" not in step["run"]:
                script = (
                    step["run"].replace("${{ matrix.shard }}", str(shard)).replace("${{ github.base_ref }}", "main")
                )
                proc = run_script(project, script, env)
                assert proc.returncode == 0, f"{script}\n{proc.stdout}\n{proc.stderr}"
    # upload-artifact (path fasttrack-out/) and download-artifact (merge-multiple into fasttrack-out/)
    # leave the shard folders where they were
    for step in merge["steps"]:
        if "run" in step and "pip install" not in step["run"]:
            script = step["run"].replace("${{ github.base_ref }}", "main")
            proc = run_script(project, script, env)
            assert proc.returncode in (0, 1, 3), f"{script}\n{proc.stdout}\n{proc.stderr}"
    assert outcomes(project / "fasttrack-merged") == expected
