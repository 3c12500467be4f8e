"""A short coverage-guided campaign (atheris) from the committed seed corpus, in a child
process. ``CODEACT_FUZZ_SECONDS`` sets its length (CI: 15 s; ``make fuzz``: longer)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("atheris")

REPO = Path(__file__).resolve().parent.parent
SECONDS = int(os.environ.get("CODEACT_FUZZ_SECONDS", "15"))


def test_atheris_campaign_finds_no_crash(tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(REPO / "fuzz" / "corpus", corpus)
    child = subprocess.run(
        [
            sys.executable,
            str(REPO / "fuzz" / "atheris_harness.py"),
            str(corpus),
            f"-max_total_time={SECONDS}",
            "-timeout=10",
            "-rss_limit_mb=4096",
            f"-artifact_prefix={tmp_path}/",
        ],
        capture_output=True,
        text=True,
        timeout=SECONDS + 120,
        cwd=tmp_path,
    )
    tail = child.stderr[-4000:]
    assert child.returncode == 0, tail
    runs = re.search(r"Done (\d+) runs", child.stderr)
    assert runs, tail
    print(f"atheris: {runs.group(1)} inputs in {SECONDS} s")
