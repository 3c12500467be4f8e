"""Prepares the patched ``monty-types`` crate the build uses (``rust/patched/monty-types``).

Monty 1.4 reads a run's memory from one process-wide counter, so two scripts advancing at
once on two threads would share a budget. ``rust/patches/*.patch`` adds a host-installable
memory probe (``MEMORY_PROBE``) so codeact can count each run's bytes separately. The crate
source is never kept in the repository: this script takes the published crate that cargo
downloads into its registry, copies it under ``rust/patched/`` (ignored by git) and applies
the patch. Run it before any cargo or maturin command (the Makefile does).

Usage: ``python tools/patch_monty.py`` (idempotent; ``--force`` re-creates the copy).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CRATE = "monty-types"
VERSION = "1.4.0"
ROOT = Path(__file__).resolve().parent.parent
PATCHES = sorted((ROOT / "rust" / "patches").glob(f"{CRATE}-{VERSION}-*.patch"))
DEST = ROOT / "rust" / "patched" / CRATE
STAMP = DEST / ".codeact-patched"


def _cargo_home() -> Path:
    return Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))


def _registry_copy() -> Path | None:
    found = sorted(glob.glob(str(_cargo_home() / "registry" / "src" / "*" / f"{CRATE}-{VERSION}")))
    return Path(found[0]) if found else None


def _fetch() -> None:
    """Has cargo download the published crate (checksum-verified) into its registry."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "src").mkdir()
        (Path(tmp) / "src" / "lib.rs").write_text("")
        (Path(tmp) / "Cargo.toml").write_text(
            f'[package]\nname = "codeact-fetch"\nversion = "0.0.0"\nedition = "2021"\n\n'
            f'[dependencies]\n{CRATE} = "={VERSION}"\n'
        )
        subprocess.run([os.environ.get("CARGO", "cargo"), "fetch", "--manifest-path", f"{tmp}/Cargo.toml"], check=True)


def main() -> int:
    stamp = "\n".join(p.read_text() for p in PATCHES)
    if "--force" not in sys.argv and STAMP.exists() and STAMP.read_text() == stamp:
        return 0
    source = _registry_copy()
    if source is None:
        _fetch()
        source = _registry_copy()
    if source is None:
        print(f"cannot find {CRATE} {VERSION} in the cargo registry", file=sys.stderr)
        return 1
    if DEST.exists():
        shutil.rmtree(DEST)
    shutil.copytree(source, DEST, ignore=shutil.ignore_patterns(".cargo-ok", ".cargo_vcs_info.json"))
    for patch in PATCHES:
        subprocess.run(["patch", "-p1", "--forward", "--quiet", "-d", str(DEST), "-i", str(patch)], check=True)
    STAMP.write_text(stamp)
    print(f"patched {CRATE} {VERSION} with {', '.join(p.name for p in PATCHES)} into {DEST.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
