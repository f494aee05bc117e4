"""Reading a real /metrics scrape, and promtool (Debian package `prometheus`) when the machine has it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

# What a family named `x` of each type exposes as sample names (the text format 0.0.4 of prometheus_client).
_SAMPLE_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
    "gauge": ("",),
    "info": ("_info",),
    "stateset": ("",),
    "gaugehistogram": ("_bucket", "_gcount", "_gsum"),
    "unknown": ("",),
}


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as reply:
        assert reply.status == 200
        return reply.read().decode()


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples_: dict, name: str, **labels: str) -> float:
    return samples_.get((name, frozenset(labels.items())), 0.0)


def label_values(samples_: dict, name: str, label: str) -> set[str]:
    return {dict(labels)[label] for (n, labels) in samples_ if n == name and label in dict(labels)}


def exported_names(text: str) -> set[str]:
    """Every name a PromQL selector can use against this scrape: each family's sample names, whether
    or not the family has samples yet (a labelled family with no child only has HELP/TYPE lines)."""
    names = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE):
        base = name[: -len("_total")] if kind == "counter" and name.endswith("_total") else name
        names.update(base + suffix for suffix in _SAMPLE_SUFFIXES.get(kind, ("",)))
    return names


def promtool() -> str:
    """promtool's path; a missing promtool fails the test under CI=true and skips it (loudly) elsewhere."""
    path = shutil.which("promtool")
    if path:
        return path
    message = (
        "promtool not found: install the Debian package `prometheus` "
        "(`apt-get install -y --no-install-recommends prometheus`; .ci/run does it)"
    )
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + " — CI=true, so this is a failure, not a skip")
    pytest.skip(message + " — SKIPPED")
    raise AssertionError("unreachable")


def promtool_run(*args: str, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([promtool(), *args], input=stdin, capture_output=True, text=True, timeout=120, cwd=cwd)
