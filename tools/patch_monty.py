"""Prepares the patched Monty crates (``rust/patched/<crate>-1.4.0-<digest>``) for plain cargo commands.

The logic lives in the build backend (``build_backend/codeact_build/monty_patch.py``), which
``pip install .`` and ``python -m build`` run by themselves; run this before ``cargo test``,
``cargo clippy`` or ``maturin develop`` in a fresh checkout (``make patch`` does).

Usage: ``python tools/patch_monty.py`` (idempotent; ``--force`` re-creates the copies).
"""

from __future__ import annotations

import sys
from pathlib import Path

# The module itself, not the package: the package imports maturin, which a bare python3 may lack.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "build_backend" / "codeact_build"))

from monty_patch import main

if __name__ == "__main__":
    sys.exit(main())
