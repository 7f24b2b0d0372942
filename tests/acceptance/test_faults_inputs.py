"""#20 rows 1, 7, 8, 9, 10 and 12: bad input and careless use. Each is an exit 2 with one paragraph
naming the file (and line where there is one), nothing run and no traceback; or, where the input
is fine but unusual (a file name that is not UTF-8), a run whose evidence records it."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from support.projects import git


def fasttrack(cwd: Path, *args: str | bytes, limit_memory: bool = False) -> subprocess.CompletedProcess:
    def cap() -> None:  # as `ulimit -v 1500000` in the issue: a runaway read ends in MemoryError
        resource.setrlimit(resource.RLIMIT_AS, (1_500_000 * 1024, 1_500_000 * 1024))

    return subprocess.run(
        [sys.executable.encode(), b"-m", b"fasttrack", *(a if isinstance(a, bytes) else a.encode() for a in args)],
        cwd=cwd,
        capture_output=True,
        timeout=300,
        preexec_fn=cap if limit_memory else None,
    )


def one_paragraph_error(done: subprocess.CompletedProcess, *words: str) -> str:
    err = done.stderr.decode(errors="replace")
    assert done.returncode == 2, (done.returncode, err, done.stdout)
    assert "Traceback" not in err and "internal error" not in err, err
    for w in words:
        assert w in err + done.stdout.decode(errors="replace"), (w, err)
    return err


@pytest.mark.parametrize(
    "text",
    [
        "x: " + "{a: " * 500 + "1" + "}" * 500,  # 500 nested flow mappings (2.5 kB)
        "x: " + "[" * 990 + "1" + "]" * 990,  # 990 nested flow lists
        "a: &a [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n"  # deep only through aliases
        + "".join(
            f"b{i}: &b{i} [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[*{'a' if i == 0 else f'b{i - 1}'}]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n"
            for i in range(12)
        ),
    ],
    ids=["mappings", "lists", "aliases"],
)
def test_row1_deep_nesting_is_a_manifest_error_with_its_line(tmp_path, text):
    (tmp_path / "n.yaml").write_text(text)
    for command in (["validate", "n.yaml"], ["check", "n.yaml", "--out", "o"]):
        done = fasttrack(tmp_path, *command)
        out = done.stdout.decode() + done.stderr.decode()
        assert done.returncode == 2 and "Traceback" not in out and "RecursionError" not in out, out
        assert "n.yaml:1" in out or "n.yaml:2" in out or "n.yaml:3" in out, out
        assert "nest deeper than 64 levels" in out, out
    assert not (tmp_path / "o" / "evidence.json").exists()


def test_row1_deep_json_evidence_is_an_evidence_error(tmp_path):
    (tmp_path / "evidence.json").write_text('{"checks": ' + "[" * 5000 + "]" * 5000 + "}")
    for command in (["verify", "evidence.json"], ["report", "evidence.json"], ["attest", "evidence.json"]):
        one_paragraph_error(fasttrack(tmp_path, *command), "evidence.json:1", "nested deeper than 128 levels")


@pytest.mark.parametrize(
    "out",
    ["/proc/x", "fasttrack.yaml/sub", "a" * 300, "loop"],
    ids=["unwritable", "under-a-file", "too-long", "symlink-loop"],
)
def test_row7_a_bad_out_is_a_usage_error_for_every_command(project, out, tmp_path):
    if out == "loop":
        (project / "loop").symlink_to("loop")
    check = fasttrack(project, "check", "fasttrack.yaml", "--only", "scope", "--out", out)
    one_paragraph_error(check, "--out", "cannot write there" if out != "fasttrack.yaml/sub" else "sub")
    run = tmp_path / "run"
    assert fasttrack(project, "check", "fasttrack.yaml", "--only", "scope", "--out", str(run)).returncode == 0
    one_paragraph_error(fasttrack(project, "merge", str(run), "--out", out), "--out")
    one_paragraph_error(fasttrack(project, "dashboard", str(run), "-o", out), "--out")
    one_paragraph_error(fasttrack(project, "report", str(run), "--html", f"{out}/r.html"), "--html")


def test_row8_names_that_are_not_utf8_are_recorded_escaped(project, tmp_path):
    name = b"bad\xffname.yaml"
    (project / name.decode("utf-8", "surrogateescape")).write_bytes((project / "fasttrack.yaml").read_bytes())
    out = str(tmp_path).encode() + b"/out\xffdir"
    done = fasttrack(project, "check", name, "--only", "scope", "--out", out)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    evidence_path = Path(out.decode("utf-8", "surrogateescape")) / "evidence.json"
    evidence = json.loads(evidence_path.read_text("utf-8"))  # valid UTF-8 throughout
    assert evidence["manifest"]["path"] == "bad\\xffname.yaml"
    assert "bad\\xffname.yaml" in evidence["run"]["argv"]
    assert fasttrack(project, "verify", out, "--allow-partial").returncode == 0


@pytest.mark.parametrize("scale", ["nan", "inf", "-inf", "0", "-1"])
def test_row9_a_timeout_scale_that_is_not_a_finite_positive_number_runs_nothing(project, tmp_path, scale):
    done = fasttrack(project, "check", "fasttrack.yaml", "--timeout-scale", scale, "--out", str(tmp_path / "o"))
    err = one_paragraph_error(done, "--timeout-scale must be a finite number above 0")
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()  # nothing ran, nothing written


def test_row10_an_endless_or_huge_input_stops_at_the_cap(tmp_path):
    one_paragraph_error(
        fasttrack(tmp_path, "validate", "/dev/zero", limit_memory=True), "/dev/zero:1", "larger than 16 MiB"
    )
    one_paragraph_error(fasttrack(tmp_path, "check", "/dev/zero", limit_memory=True), "larger than 16 MiB")
    one_paragraph_error(fasttrack(tmp_path, "verify", "/dev/zero", limit_memory=True), "larger than 64 MiB")
    big = tmp_path / "big.yaml"
    big.write_bytes(b"# " + b"x" * (17 * 1024 * 1024) + b"\n")
    one_paragraph_error(fasttrack(tmp_path, "validate", "big.yaml"), "big.yaml:1", "larger than 16 MiB")


def test_row12_validate_and_the_claims_lint_agree_on_setups_differing_in_notes(project):
    manifest = project / "fasttrack.yaml"
    data = yaml.safe_load(manifest.read_text())
    claim = {
        "id": "toy-b1",
        "statement": "batch-1 decode 1.3x faster",
        "speedup": 1.3,
        "baseline": {"setup": {"accelerator": "cpu", "notes": "stock build, run on Monday"}},
        "candidate": {"setup": {"accelerator": "cpu", "notes": "fast build, run on Tuesday"}},
    }
    data["benchmarks"] = [
        {
            "id": "decode",
            "metric": "decode_tokens_per_s_per_user",
            "points": {"batch": [1]},
            "workload": {"kind": "synthetic", "input_tokens": 16, "output_tokens": 8},
            "repeats": 5,
            "claims": [claim],
        }
    ]
    manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    git(project, "commit", "-qam", "a claim whose setups differ only in notes")
    validate = fasttrack(project, "validate", "fasttrack.yaml")
    assert validate.returncode == 0 and "not comparable" not in validate.stdout.decode(), validate.stdout
    done = fasttrack(project, "check", "fasttrack.yaml", "--only", "claims", "--out", "o", "--no-reports")
    assert done.returncode == 3, done.stderr  # the lint alone decides nothing: no required outcome
    (lint,) = [c for c in json.loads((project / "o" / "evidence.json").read_text())["checks"] if c["kind"] == "claims"]
    assert lint["status"] == "passed" and lint["reason_code"] is None, lint  # comparable, as validate says
    # A real difference: both say not comparable.
    claim["candidate"]["setup"]["gpus"] = 2
    manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    git(project, "commit", "-qam", "setups differ")
    assert "is not comparable" in fasttrack(project, "validate", "fasttrack.yaml").stdout.decode()
    fasttrack(project, "check", "fasttrack.yaml", "--only", "claims", "--out", "o2", "--no-reports")
    (lint,) = [c for c in json.loads((project / "o2" / "evidence.json").read_text())["checks"] if c["kind"] == "claims"]
    assert (lint["status"], lint["reason_code"]) == ("not_run", "not_comparable")
