"""What an approval walks through before the approved tool runs (issue 47's measure): the
codeact files ``Runner.approve`` enters until the tool is reached, and the restores of the
paused continuation. ``tools/approval_path.py`` prints the files."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from approval_path import measure_approval

MAX_FILES = 33
"""The files entered on this tree (issue 47's goal is 6: see its closing note); a change that
adds files to the approval path fails here and must say why. 28 -> 29: an approval checks the
tool's declared ``editable`` and ``payload_type`` (``tools/_base.py``, issue 49); 29 -> 30: the
stores' shared SQL flow moved to ``sessions/_sql.py`` (issue 50); 30 -> 31: the runner's decision
resolution moved to ``_runner_decide.py`` (runner.py back under 900 lines)."""


def test_an_approval_restores_once_and_enters_no_more_files_than_before(tmp_path: Path) -> None:
    files, restores, ran = anyio.run(measure_approval, tmp_path / "s.db")
    assert ran == ["wire 9"]
    assert restores == 1
    assert "runner.py" in files and "runtime/monty.py" in files  # the trace sees the path
    assert len(files) <= MAX_FILES, files
