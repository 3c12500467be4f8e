"""Prepares the patched Monty crates the build uses (``rust/patched/monty-types``, ``rust/patched/monty``).

``rust/patches/<crate>-<version>-*.patch`` holds codeact's small, upstreamable changes (ADR 0003):
in ``monty-types`` a host-installable memory probe (``MEMORY_PROBE``, so each run's bytes are
counted separately when several advance on different threads) and a time forecast
(``ResourceTracker::check_time_for``); in ``monty`` a cost estimate before big-integer
products and large repeats (so one operation cannot overrun the time limit by its whole
length) and a host-installable message for a host call made inside a synchronous callback.
The crate sources are never kept in the repository nor in the sdist: this module takes the
published crates that cargo downloads (checksum-verified) into its registry, copies each under
``rust/patched/`` (ignored by git) and applies its patches. ``Cargo.toml``'s
``[patch.crates-io]`` points there, so cargo cannot even read the workspace until they exist.

It runs on its own before every build: the PEP 517 backend (``codeact_build``) calls
:func:`prepare` first, and ``tools/patch_monty.py`` / ``make patch`` call :func:`main` for
plain cargo commands (``cargo test``, ``clippy``, ``maturin develop``).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CRATES = ("monty-types", "monty")
"""The crates patched, each at ``VERSION`` (each has at least one patch file)."""
VERSION = "1.4.0"
ROOT = Path(__file__).resolve().parents[2]


class PatchError(RuntimeError):
    """The published crate could not be fetched or the patch did not apply."""


def _patches(root: Path, crate: str) -> list[Path]:
    # "monty-1.4.0-*" cannot match "monty-types-1.4.0-*": the version follows the name
    return sorted((root / "rust" / "patches").glob(f"{crate}-{VERSION}-*.patch"))


def _cargo_home() -> Path:
    return Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))


def _registry_copy(crate: str) -> Path | None:
    found = sorted(glob.glob(str(_cargo_home() / "registry" / "src" / "*" / f"{crate}-{VERSION}")))
    return Path(found[0]) if found else None


def _cargo() -> str:
    cargo = os.environ.get("CARGO") or shutil.which("cargo")
    if not cargo:
        raise PatchError(
            f"cargo is needed to fetch Monty {VERSION} from crates.io and build codeact's extension; "
            "install a Rust toolchain (rustc/cargo 1.96 or newer, https://rustup.rs) and put cargo on PATH"
        )
    return cargo


def _fetch() -> None:
    """Has cargo download the published crates (checksum-verified) into its registry."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "src").mkdir()
        (Path(tmp) / "src" / "lib.rs").write_text("")
        (Path(tmp) / "Cargo.toml").write_text(
            '[package]\nname = "codeact-fetch"\nversion = "0.0.0"\nedition = "2021"\n\n'
            "[dependencies]\n" + "".join(f'{crate} = "={VERSION}"\n' for crate in CRATES)
        )
        done = subprocess.run([_cargo(), "fetch", "--manifest-path", f"{tmp}/Cargo.toml"], check=False)
        if done.returncode != 0:
            raise PatchError(
                f"`cargo fetch` of {', '.join(CRATES)} {VERSION} failed (exit {done.returncode}); "
                "is crates.io reachable?"
            )


def _apply(patch: Path, dest: Path, crate: str) -> None:
    """Applies one unified diff with ``patch`` (or ``git apply`` where ``patch`` is missing)."""
    if shutil.which("patch"):
        command = ["patch", "-p1", "--forward", "--quiet", "-d", str(dest), "-i", str(patch)]
    elif shutil.which("git"):
        command = ["git", "-C", str(dest), "apply", "-p1", str(patch)]
    else:
        raise PatchError(f"applying {patch.name} needs the `patch` program or git; neither is on PATH")
    done = subprocess.run(command, check=False)
    if done.returncode != 0:
        raise PatchError(f"{patch.name} did not apply to {crate} {VERSION} (exit {done.returncode})")


def prepare_crate(crate: str, root: Path = ROOT, *, force: bool = False) -> Path:
    """Makes ``root/rust/patched/<crate>`` the published crate with its patches applied.

    Idempotent: a copy stamped with the current patches' text is kept as it is (``force``
    re-creates it). Returns the crate's folder.

    Raises:
        PatchError: cargo is missing, the crate cannot be fetched, or a patch does not apply.
    """
    patches = _patches(root, crate)
    if not patches:
        raise PatchError(f"no {crate}-{VERSION}-*.patch under {root / 'rust' / 'patches'}")
    dest = root / "rust" / "patched" / crate
    stamp_file = dest / ".codeact-patched"
    stamp = "\n".join(p.read_text() for p in patches)
    if not force and stamp_file.exists() and stamp_file.read_text() == stamp:
        return dest
    source = _registry_copy(crate)
    if source is None:
        _fetch()
        source = _registry_copy(crate)
    if source is None:
        raise PatchError(f"cannot find {crate} {VERSION} in the cargo registry under {_cargo_home()}")
    staging = dest.with_name(f".{crate}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(source, staging, ignore=shutil.ignore_patterns(".cargo-ok", ".cargo_vcs_info.json"))
    try:
        for patch in patches:
            _apply(patch, staging, crate)
    except PatchError:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    (staging / ".codeact-patched").write_text(stamp)
    shutil.rmtree(dest, ignore_errors=True)
    staging.rename(dest)
    print(f"patched {crate} {VERSION} with {', '.join(p.name for p in patches)} into {dest}", file=sys.stderr)
    return dest


def prepare(root: Path = ROOT, *, force: bool = False) -> list[Path]:
    """Prepares every crate of ``CRATES`` (:func:`prepare_crate`); returns their folders.

    Raises:
        PatchError: cargo is missing, a crate cannot be fetched, or a patch does not apply.
    """
    return [prepare_crate(crate, root, force=force) for crate in CRATES]


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python tools/patch_monty.py [--force]``; exit 1 with the reason on failure."""
    args = sys.argv[1:] if argv is None else argv
    try:
        prepare(force="--force" in args)
    except PatchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
