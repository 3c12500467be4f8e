"""Prepares the patched ``monty-types`` crate the build uses (``rust/patched/monty-types-1.4.0-<digest>``).

Monty 1.4 reads a run's memory from one process-wide counter, so two scripts advancing at
once on two threads would share a budget. ``rust/patches/*.patch`` adds a host-installable
memory probe (``MEMORY_PROBE``) so codeact can count each run's bytes separately (ADR 0003).
The crate source is never kept in the repository nor in the sdist: this module takes the
published crate that cargo downloads (checksum-verified) into its registry, copies it under
``rust/patched/`` (ignored by git), applies the patch, and writes ``.cargo/config.toml``
(ignored by git too) whose ``[patch.crates-io]`` entry points cargo at the copy.

The copy's folder is named by a digest of the patches, and every file in it gets one fixed
modification time, so a checkout at another path (a fresh clone, pip's unpacked sdist) has
byte- and time-identical files at the same workspace-relative path: cargo finds its earlier
build of Monty in a shared ``CARGO_TARGET_DIR`` fresh instead of rebuilding it. A changed
patch is a new folder, hence a new package path and new build outputs: never a stale build.

Without the config (a fresh clone), cargo reads the workspace with the published, unpatched
crate: ``cargo metadata`` works, compiling ``codeact-monty`` does not (``MEMORY_PROBE``).

It runs on its own before every build: the PEP 517 backend (``codeact_build``) calls
:func:`prepare` first, and ``tools/patch_monty.py`` / ``make patch`` call :func:`main` for
plain cargo commands (``cargo test``, ``clippy``, ``maturin develop``).
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CRATE = "monty-types"
VERSION = "1.4.0"
ROOT = Path(__file__).resolve().parents[2]
# 2000-01-01T00:00:00Z: every file of the prepared copy gets this modification time (see above).
FIXED_MTIME = 946_684_800
CONFIG_MARKER = "# Written by codeact's build backend (build_backend/codeact_build/monty_patch.py)"


class PatchError(RuntimeError):
    """The published crate could not be fetched or the patch did not apply."""


def _patches(root: Path) -> list[Path]:
    return sorted((root / "rust" / "patches").glob(f"{CRATE}-{VERSION}-*.patch"))


def _cargo_home() -> Path:
    return Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))


def _registry_copy() -> Path | None:
    found = sorted(glob.glob(str(_cargo_home() / "registry" / "src" / "*" / f"{CRATE}-{VERSION}")))
    return Path(found[0]) if found else None


def _cargo() -> str:
    cargo = os.environ.get("CARGO") or shutil.which("cargo")
    if not cargo:
        raise PatchError(
            f"cargo is needed to fetch {CRATE} {VERSION} from crates.io and build codeact's extension; "
            "install a Rust toolchain (rustc/cargo 1.96 or newer, https://rustup.rs) and put cargo on PATH"
        )
    return cargo


def _fetch() -> None:
    """Has cargo download the published crate (checksum-verified) into its registry."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "src").mkdir()
        (Path(tmp) / "src" / "lib.rs").write_text("")
        (Path(tmp) / "Cargo.toml").write_text(
            f'[package]\nname = "codeact-fetch"\nversion = "0.0.0"\nedition = "2021"\n\n'
            f'[dependencies]\n{CRATE} = "={VERSION}"\n'
        )
        done = subprocess.run([_cargo(), "fetch", "--manifest-path", f"{tmp}/Cargo.toml"], check=False)
        if done.returncode != 0:
            raise PatchError(
                f"`cargo fetch` of {CRATE} {VERSION} failed (exit {done.returncode}); is crates.io reachable?"
            )


def _apply(patch: Path, dest: Path) -> None:
    """Applies one unified diff with ``patch`` (or ``git apply`` where ``patch`` is missing)."""
    if shutil.which("patch"):
        command = ["patch", "-p1", "--forward", "--quiet", "-d", str(dest), "-i", str(patch)]
    elif shutil.which("git"):
        command = ["git", "-C", str(dest), "apply", "-p1", str(patch)]
    else:
        raise PatchError(f"applying {patch.name} needs the `patch` program or git; neither is on PATH")
    done = subprocess.run(command, check=False)
    if done.returncode != 0:
        raise PatchError(f"{patch.name} did not apply to {CRATE} {VERSION} (exit {done.returncode})")


def _config_text(crate_dir: str) -> str:
    return (
        f"{CONFIG_MARKER}; git-ignored, re-created by every build (ADR 0003).\n"
        f"# {CRATE} {VERSION} with rust/patches applied.\n"
        "[patch.crates-io]\n"
        f'{CRATE} = {{ path = "{crate_dir}" }}\n'
    )


def _write_config(root: Path, crate: Path) -> None:
    """Points ``root/.cargo/config.toml``'s ``[patch.crates-io]`` at ``crate`` (a path relative to ``root``)."""
    config = root / ".cargo" / "config.toml"
    text = _config_text(crate.relative_to(root).as_posix())
    if config.exists():
        current = config.read_text()
        if current == text:
            return
        if not current.startswith(CONFIG_MARKER):
            raise PatchError(
                f"{config} exists and was not written by codeact's build; add its settings by hand: {text!r}"
            )
    config.parent.mkdir(exist_ok=True)
    config.write_text(text)


def _pin_mtimes(folder: Path) -> None:
    for path in [*folder.rglob("*"), folder]:
        os.utime(path, (FIXED_MTIME, FIXED_MTIME))


def prepare(root: Path = ROOT, *, force: bool = False) -> Path:
    """Makes ``root/rust/patched/monty-types-1.4.0-<digest>`` the published crate with the patches applied.

    ``<digest>`` is the first 12 hex digits of the SHA-256 of the patches' text. Also writes
    ``root/.cargo/config.toml`` (``[patch.crates-io]``) and removes copies made for other
    patches. Idempotent: a stamped copy is kept as it is (``force`` re-creates it). Returns
    the crate's folder.

    Raises:
        PatchError: cargo is missing, the crate cannot be fetched, a patch does not apply, or
            ``root/.cargo/config.toml`` exists and was not written by this module.
    """
    patches = _patches(root)
    if not patches:
        raise PatchError(f"no {CRATE}-{VERSION}-*.patch under {root / 'rust' / 'patches'}")
    stamp = "\n".join(p.read_text() for p in patches)
    digest = hashlib.sha256(f"{CRATE} {VERSION}\n{stamp}".encode()).hexdigest()[:12]
    patched = root / "rust" / "patched"
    dest = patched / f"{CRATE}-{VERSION}-{digest}"
    stamp_file = dest / ".codeact-patched"
    if force or not (stamp_file.exists() and stamp_file.read_text() == stamp):
        _make_copy(patches, dest, stamp)
    _write_config(root, dest)
    for other in patched.glob(f"{CRATE}*"):  # copies for other patches, and the pre-0.2 undigested folder
        if other.name != dest.name and not other.name.startswith("."):
            shutil.rmtree(other, ignore_errors=True)
    return dest


def _make_copy(patches: list[Path], dest: Path, stamp: str) -> None:
    source = _registry_copy()
    if source is None:
        _fetch()
        source = _registry_copy()
    if source is None:
        raise PatchError(f"cannot find {CRATE} {VERSION} in the cargo registry under {_cargo_home()}")
    staging = dest.with_name(f".{dest.name}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, staging, ignore=shutil.ignore_patterns(".cargo-ok", ".cargo_vcs_info.json"))
    try:
        for patch in patches:
            _apply(patch, staging)
    except PatchError:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    for leftover in [*staging.rglob("*.orig"), *staging.rglob("*.rej")]:
        leftover.unlink()
    (staging / ".codeact-patched").write_text(stamp)
    _pin_mtimes(staging)
    shutil.rmtree(dest, ignore_errors=True)
    staging.rename(dest)
    print(f"patched {CRATE} {VERSION} with {', '.join(p.name for p in patches)} into {dest}", file=sys.stderr)


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
