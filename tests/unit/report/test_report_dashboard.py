"""The dashboard: every optimisation with its latest verdict, history, trend and report links."""

from __future__ import annotations

import re

import pytest

from fasttrack.errors import UsageError
from fasttrack.kinds.registry import KINDS
from fasttrack.report.dashboard import build_site, find_evidence, key_eval


def test_site_lists_each_optimisation_with_history(history_dir, tmp_path):
    site = build_site([history_dir], tmp_path / "site", KINDS)
    assert (site.optimisations, site.runs) == (3, 12)
    html = site.index.read_text()
    rows = re.findall(r'<tr data-optimisation="([^"]+)">(.*?)</tr>', html, re.S)
    latest = {opt: re.search(r'class="verdict v-(\w+)"', body).group(1) for opt, body in rows}
    assert latest == {
        "deepseek-v4.1-flash-mtp": "FAIL",
        "glm5.3-fp8-attention": "INCOMPLETE",
        "kimi-k3-latency": "PASS",
    }
    history = {opt: len(re.findall(r'<a class="badge', body)) for opt, body in rows}
    assert history == {"deepseek-v4.1-flash-mtp": 4, "glm5.3-fp8-attention": 3, "kimi-k3-latency": 5}
    assert html.count('class="spark"') == 3
    for href in set(re.findall(r'href="(runs/[^"]+)"', html)):
        assert (site.index.parent / href).is_file(), href
    assert "script-src 'none'" in html.replace("&#39;", "'")


def test_history_is_ordered_by_start_time(history_dir, tmp_path):
    html = build_site([history_dir], tmp_path / "site", KINDS).index.read_text()
    kimi = re.search(r'<tr data-optimisation="kimi-k3-latency">(.*?)</tr>', html, re.S).group(1)
    dates = re.findall(r">(2026-11-\d\d) (?:PASS|FAIL|INCOMPLETE)</a>", kimi)
    assert dates == sorted(dates) and len(dates) == 5


def test_key_eval_is_the_first_declared_eval(load):
    evidence, _ = load("fail")
    task, diff = key_eval(evidence, KINDS)
    assert task == "mrcr"
    diffs = [c["measurements"]["diff"] for c in evidence["checks"] if c["kind"] == "evals" and c["name"] == "mrcr"]
    assert diff == pytest.approx(sum(diffs) / len(diffs))


def test_bad_inputs_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        find_evidence([tmp_path / "missing"])
    with pytest.raises(UsageError, match="no evidence.json"):
        find_evidence([tmp_path])
