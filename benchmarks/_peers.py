"""The peers' own virtual environments, shared by the benchmarks that run a peer beside
codeact (``latency.py``, ``agent.py``, ``load.py``).

Each peer runs in a venv of its own under ``~/.cache/codeact/bench-venvs/<key>`` (pinned
versions in ``VENVS``), created from PyPI on first use, with ``uv`` when it is on the path or
beside this interpreter, else ``venv`` + ``pip``; a marker file ``.installed`` holds the
requirement line it was made with, so a changed pin makes a new venv. The benchmark then runs
a helper script with that venv's interpreter (stdlib + the peer only) and reads the JSON it
prints: codeact's environment never needs the peers, nor they codeact.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

VENVS: dict[str, list[str]] = {
    # key -> what its venv installs from PyPI
    "smolagents": ["smolagents==1.26.0"],  # CodeAgent, ToolCallingAgent
    "pydantic_ai": ["pydantic-ai-harness[codemode]==0.75.0"],  # pydantic-ai Agent, harness CodeMode
    "adk": ["google-adk==2.15.0"],  # LlmAgent
}
"""Each peer venv's requirements (pinned)."""

DEFAULT_ROOT = Path.home() / ".cache" / "codeact" / "bench-venvs"
"""Where the peer venvs live (``--venvs DIR`` overrides it in each benchmark)."""


def _uv() -> str | None:
    beside = Path(sys.executable).with_name("uv")
    return str(beside) if beside.exists() else shutil.which("uv")


def venv_python(root: Path, key: str, create: bool) -> Path | None:
    """The interpreter of peer ``key``'s venv (``root/<key>``), created with ``VENVS[key]``
    from PyPI when it is missing (or was made from other pins) and ``create``; None when it is
    missing and not created. Raises ``subprocess.CalledProcessError`` when an install fails,
    ``KeyError`` for an unknown key."""
    packages = VENVS[key]
    folder = root / key
    python = folder / ("Scripts" if os.name == "nt" else "bin") / "python"
    ready = folder / ".installed"
    if ready.exists() and ready.read_text() == " ".join(packages):
        return python
    if not create:
        return None
    print(f"creating {folder} ({' '.join(packages)}) from PyPI ...", flush=True)
    uv = _uv()
    if uv is not None:
        subprocess.run([uv, "venv", "-q", "--clear", "--python", sys.executable, str(folder)], check=True)
        subprocess.run([uv, "pip", "install", "-q", "--python", str(python), *packages], check=True)
    else:
        venv.EnvBuilder(with_pip=True, clear=True).create(folder)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *packages], check=True)
    ready.write_text(" ".join(packages))
    return python


def peer_python(key: str, root: Path, *, create: bool, given: dict[str, str] | None = None) -> Path | str:
    """The interpreter that runs peer ``key``: ``given[key]`` when the caller named one, else
    its venv (created when ``create``); or a sentence saying why the peer is skipped."""
    if given and key in given:
        return Path(given[key])
    try:
        python = venv_python(root, key, create)
    except subprocess.CalledProcessError as exc:
        return f"venv for {key} failed: {exc}"
    if python is None:
        return f"no venv for {key} under {root} (run without --quick once to create it)"
    return python
