"""Prepares the patched Monty crates the build uses (``rust/patched/<crate>-1.4.0-<digest>``).

``rust/patches/<crate>-<version>-*.patch`` holds codeact's small, upstreamable changes (ADR 0003):
in ``monty-types`` a host-installable memory probe (``MEMORY_PROBE``, so each run's bytes are
counted separately when several advance on different threads) and a time forecast
(``ResourceTracker::check_time_for``); in ``monty`` a cost estimate before big-integer products
and large repeats (so one operation cannot overrun the time limit by its whole length), a
host-installable message for a host call made inside a synchronous callback, and the year of
``time.timezone``/``altzone``/``tzname``/``daylight`` under a named zone when the host answers
the clock (the process clock's year: module creation cannot suspend); in ``monty-fs`` an
overlay's state rebuilt from and read back into the session's file layer (ADR 0004). The crate sources
are never kept in the repository nor in the sdist: this module takes the published crates that
cargo downloads (checksum-verified) into its registry, copies each under ``rust/patched/``
(ignored by git), applies its patches, and writes ``.cargo/config.toml`` (ignored by git too)
whose ``[patch.crates-io]`` entries point cargo at the copies.

Each copy's folder is named by a digest of its patches, and every file in it gets one fixed
modification time, so a checkout at another path (a fresh clone, pip's unpacked sdist) has
byte- and time-identical files at the same workspace-relative path: cargo finds its earlier
build of Monty in a shared ``CARGO_TARGET_DIR`` fresh instead of rebuilding it. A changed
patch is a new folder, hence a new package path and new build outputs: never a stale build.

Without the config (a fresh clone), cargo reads the workspace with the published, unpatched
crates: ``cargo metadata`` works, compiling ``codeact-monty`` does not (``MEMORY_PROBE``).

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

CRATES = ("monty-types", "monty", "monty-fs")
"""The crates patched, each at ``VERSION`` (each has at least one patch file)."""
VERSION = "1.4.0"
ROOT = Path(__file__).resolve().parents[2]
# 2000-01-01T00:00:00Z: every file of the prepared copy gets this modification time (see above).
FIXED_MTIME = 946_684_800
CONFIG_MARKER = "# Written by codeact's build backend (build_backend/codeact_build/monty_patch.py)"


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


def _config_text(crate_dirs: dict[str, str]) -> str:
    return (
        f"{CONFIG_MARKER}; git-ignored, re-created by every build (ADR 0003).\n"
        f"# {', '.join(crate_dirs)} {VERSION} with rust/patches applied.\n"
        "[patch.crates-io]\n" + "".join(f'{crate} = {{ path = "{path}" }}\n' for crate, path in crate_dirs.items())
    )


def _write_config(root: Path, crates: dict[str, Path]) -> None:
    """Points ``root/.cargo/config.toml``'s ``[patch.crates-io]`` at each crate's folder (under ``root``)."""
    config = root / ".cargo" / "config.toml"
    text = _config_text({crate: path.relative_to(root).as_posix() for crate, path in crates.items()})
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


def prepare(root: Path = ROOT, *, force: bool = False) -> list[Path]:
    """Makes ``root/rust/patched/<crate>-1.4.0-<digest>``, for every crate of ``CRATES``, the
    published crate with its patches applied.

    ``<digest>`` is the first 12 hex digits of the SHA-256 of the crate's patches' text. Also
    writes ``root/.cargo/config.toml`` (``[patch.crates-io]``) and removes copies made for other
    patches. Idempotent: a stamped copy is kept as it is (``force`` re-creates it). Returns the
    crates' folders, in the order of ``CRATES``.

    Raises:
        PatchError: cargo is missing, a crate cannot be fetched, a patch does not apply, or
            ``root/.cargo/config.toml`` exists and was not written by this module.
    """
    patched = root / "rust" / "patched"
    prepared: dict[str, Path] = {}
    for crate in CRATES:
        patches = _patches(root, crate)
        if not patches:
            raise PatchError(f"no {crate}-{VERSION}-*.patch under {root / 'rust' / 'patches'}")
        stamp = "\n".join(p.read_text() for p in patches)
        digest = hashlib.sha256(f"{crate} {VERSION}\n{stamp}".encode()).hexdigest()[:12]
        dest = patched / f"{crate}-{VERSION}-{digest}"
        stamp_file = dest / ".codeact-patched"
        if force or not (stamp_file.exists() and stamp_file.read_text() == stamp):
            _make_copy(crate, patches, dest, stamp)
        prepared[crate] = dest
    _write_config(root, prepared)
    keep = {path.name for path in prepared.values()}
    for crate in CRATES:
        # copies for other patches, and the pre-0.2 undigested folders ("monty-" is not "monty-types-")
        for other in [*patched.glob(f"{crate}-{VERSION}-*"), patched / crate]:
            if other.name not in keep and other.exists() and not other.name.startswith("."):
                shutil.rmtree(other, ignore_errors=True)
    return list(prepared.values())


def _make_copy(crate: str, patches: list[Path], dest: Path, stamp: str) -> None:
    source = _registry_copy(crate)
    if source is None:
        _fetch()
        source = _registry_copy(crate)
    if source is None:
        raise PatchError(f"cannot find {crate} {VERSION} in the cargo registry under {_cargo_home()}")
    staging = dest.with_name(f".{dest.name}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, staging, ignore=shutil.ignore_patterns(".cargo-ok", ".cargo_vcs_info.json"))
    try:
        for patch in patches:
            _apply(patch, staging, crate)
    except PatchError:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    for leftover in [*staging.rglob("*.orig"), *staging.rglob("*.rej")]:
        leftover.unlink()
    (staging / ".codeact-patched").write_text(stamp)
    _pin_mtimes(staging)
    shutil.rmtree(dest, ignore_errors=True)
    staging.rename(dest)
    print(f"patched {crate} {VERSION} with {', '.join(p.name for p in patches)} into {dest}", file=sys.stderr)


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
