"""Release metadata and the build backend's crate preparation (issue 26).

The version is the same everywhere a user or a tool reads it, ``codeact --version`` prints it,
and ``build_backend/codeact_build/monty_patch.py`` turns the published ``monty-types`` and ``monty``
crates (from cargo's registry, fetched by cargo when missing) into the patched copies the workspace's
``[patch.crates-io]`` needs, idempotently, re-creating it when a patch changes and failing
clearly when one does not apply.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import codeact

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "build_backend" / "codeact_build"))
import monty_patch  # noqa: E402


def _toml_version(path: Path, table: str) -> str:
    """The ``version = "..."`` line of ``[table]`` (tomllib is 3.11+; the suite runs on 3.10 too)."""
    text = path.read_text()
    section = text.split(f"[{table}]\n", 1)[1].split("\n[", 1)[0]
    found = re.search(r'^version = "([^"]+)"$', section, re.MULTILINE)
    assert found, f"no version in [{table}] of {path}"
    return found.group(1)


def test_version_is_the_same_in_every_manifest() -> None:
    assert _toml_version(ROOT / "pyproject.toml", "project") == codeact.__version__
    assert _toml_version(ROOT / "Cargo.toml", "workspace.package") == codeact.__version__
    for crate in ("rust/Cargo.toml", "rust/bench/Cargo.toml"):
        assert "version.workspace = true" in (ROOT / crate).read_text(), crate


def test_installed_distribution_has_the_package_version() -> None:
    assert importlib.metadata.version("codeact") == codeact.__version__


def test_installed_distribution_carries_the_bundled_notices() -> None:
    """The wheel ships the licence texts of the crates linked into ``_monty`` (THIRD_PARTY_NOTICES.md)."""
    files = importlib.metadata.files("codeact") or []
    names = {Path(str(f)).name for f in files}
    assert {"LICENSE", "THIRD_PARTY_NOTICES.md"} <= names, sorted(n for n in names if n.isupper() or "NOTICE" in n)
    notices = next(f for f in files if Path(str(f)).name == "THIRD_PARTY_NOTICES.md").read_text()
    for crate in ("monty", "monty-types", "pyo3", "ruff_python_parser", "num-bigint"):
        assert re.search(rf"^\| {re.escape(crate)} \| ", notices, re.MULTILINE), crate


def test_installed_distribution_carries_the_web_templates() -> None:
    """``codeact serve``'s templates and script ship in the wheel (package data of codeact.web)."""
    files = {str(f).replace("\\", "/") for f in importlib.metadata.files("codeact") or []}
    if "codeact/__init__.py" not in files:
        pytest.skip("an editable install lists no package files (make test installs the wheel)")
    for name in ("base.html", "inbox.html", "session.html", "sessions.html", "error.html", "_macros.html"):
        assert f"codeact/web/templates/{name}" in files, name
    assert {"codeact/web/static/live.js", "codeact/web/static/style.css"} <= files


def test_notices_list_every_linked_crate() -> None:
    """THIRD_PARTY_NOTICES.md matches ``cargo metadata`` (skipped without cargo 1.96 and the patched crate)."""
    cargo = shutil.which("cargo", path="/usr/bin") or shutil.which("cargo")
    if cargo is None or not (ROOT / ".cargo" / "config.toml").is_file():
        pytest.skip("needs cargo and the patched Monty crates (make patch)")
    env = {**os.environ, "PATH": f"{Path(cargo).parent}:{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "third_party_notices.py"), "--check"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def test_changelog_has_a_section_for_this_version() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"^## \[{re.escape(codeact.__version__)}\] - \d{{4}}-\d\d-\d\d$", changelog, re.MULTILINE)
    assert f"[{codeact.__version__}]: " in changelog


def test_cli_prints_the_version() -> None:
    pytest.importorskip("typer", reason="codeact[cli] is not installed")
    from typer.testing import CliRunner

    from codeact.cli import app

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"codeact {codeact.__version__}"


def _patched_path(root: Path, crate: str = "monty-types") -> str:
    """The ``path`` of ``root/.cargo/config.toml``'s ``[patch.crates-io]`` entry for ``crate``."""
    found = re.search(
        rf'^{re.escape(crate)} = \{{ path = "([^"]+)" \}}$',
        (root / ".cargo" / "config.toml").read_text(),
        re.MULTILINE,
    )
    assert found, f"no {crate} entry in [patch.crates-io]"
    return found.group(1)


def _tree(tmp_path: Path) -> Path:
    """A stand-in checkout holding only the patches (the crate comes from cargo's registry)."""
    (tmp_path / "rust").mkdir(parents=True)
    shutil.copytree(ROOT / "rust" / "patches", tmp_path / "rust" / "patches")
    return tmp_path


needs_cargo = pytest.mark.skipif(
    shutil.which("cargo") is None and None in (monty_patch._registry_copy(c) for c in monty_patch.CRATES),
    reason="needs cargo or monty-types and monty 1.4.0 copies in cargo's registry",
)


@needs_cargo
def test_prepare_applies_the_patch_to_the_published_crate(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    crates = monty_patch.prepare(root)
    types, monty, fs = crates
    for crate, name in zip(crates, monty_patch.CRATES, strict=True):
        assert crate.parent == root / "rust" / "patched"
        assert re.fullmatch(rf"{re.escape(name)}-1\.4\.0-[0-9a-f]{{12}}", crate.name), crate.name
        assert 'version = "1.4.0"' in (crate / "Cargo.toml").read_text()
        assert _patched_path(root, name) == f"rust/patched/{crate.name}"
    resource = (types / "src" / "resource.rs").read_text()
    assert "pub static MEMORY_PROBE" in resource and "pub fn check_time_for" in resource
    assert "check_product_time" in (monty / "src" / "resource_checks.rs").read_text()
    assert "pub static SYNCHRONOUS_CALL_MESSAGE" in (monty / "src" / "exception_private.rs").read_text()
    assert "pub fn from_layer" in (fs / "src" / "overlay_state.rs").read_text()
    for name, marker, path in (
        ("monty-types", "MEMORY_PROBE", "resource.rs"),
        ("monty", "check_product_time", "resource_checks.rs"),
    ):
        published = monty_patch._registry_copy(name)
        assert published is not None
        assert marker not in (published / "src" / path).read_text(), "the registry copy was modified"
    stamps = [crate / ".codeact-patched" for crate in crates]
    before = [stamp.stat().st_mtime_ns for stamp in stamps]
    assert monty_patch.prepare(root) == crates  # idempotent: the stamped copies are kept
    assert [stamp.stat().st_mtime_ns for stamp in stamps] == before


@needs_cargo
def test_two_checkouts_get_identical_copies(tmp_path: Path) -> None:
    """Same files, same mtimes at the same relative path: cargo finds a shared target folder's build fresh."""
    firsts = monty_patch.prepare(_tree(tmp_path / "a"))
    seconds = monty_patch.prepare(_tree(tmp_path / "b"))
    assert [c.relative_to(tmp_path / "a") for c in firsts] == [c.relative_to(tmp_path / "b") for c in seconds]

    def listing(crate: Path) -> dict[str, tuple[bytes, int]]:
        files = (f for f in crate.rglob("*") if f.is_file())
        return {f.relative_to(crate).as_posix(): (f.read_bytes(), f.stat().st_mtime_ns) for f in files}

    for first, second in zip(firsts, seconds, strict=True):
        assert listing(first) == listing(second)
        assert {mtime for _, mtime in listing(first).values()} == {monty_patch.FIXED_MTIME * 10**9}


@needs_cargo
def test_a_changed_patch_gets_a_new_folder(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    crate, monty, _fs = monty_patch.prepare(root)
    patch = next((root / "rust" / "patches").glob("monty-types-*.patch"))
    patch.write_text(patch.read_text() + "\n")  # same hunks, different text: a new digest
    changed, monty_again, _fs = monty_patch.prepare(root)
    assert changed != crate and not crate.exists(), "the copy for the old patch was left behind"
    assert monty_again == monty and monty.exists(), "the unchanged crate's copy was re-made"
    assert "pub static MEMORY_PROBE" in (changed / "src" / "resource.rs").read_text()
    assert _patched_path(root) == f"rust/patched/{changed.name}"


@needs_cargo
def test_a_hand_edited_copy_is_recreated_by_force(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    types, monty, fs = monty_patch.prepare(root)
    (types / "src" / "resource.rs").write_text("// edited by hand\n")
    (monty / "src" / "resource_checks.rs").write_text("// edited by hand\n")
    assert monty_patch.prepare(root, force=True) == [types, monty, fs]
    assert "pub static MEMORY_PROBE" in (types / "src" / "resource.rs").read_text()
    assert "check_product_time" in (monty / "src" / "resource_checks.rs").read_text()


def test_a_foreign_cargo_config_is_not_overwritten(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    (root / ".cargo").mkdir()
    (root / ".cargo" / "config.toml").write_text("[build]\njobs = 1\n")
    if monty_patch._registry_copy("monty-types") is None and shutil.which("cargo") is None:
        pytest.skip("needs cargo or a monty-types 1.4.0 copy in cargo's registry")
    with pytest.raises(monty_patch.PatchError, match=r"config\.toml exists and was not written by codeact"):
        monty_patch.prepare(root)
    assert (root / ".cargo" / "config.toml").read_text() == "[build]\njobs = 1\n"


@needs_cargo
def test_a_patch_that_does_not_apply_is_a_clear_error(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    (root / "rust" / "patches" / "monty-types-1.4.0-zz-broken.patch").write_text(
        "--- a/src/resource.rs\n+++ b/src/resource.rs\n@@ -1,1 +1,1 @@\n-no such line in the crate\n+replacement\n"
    )
    with pytest.raises(monty_patch.PatchError, match=r"zz-broken\.patch did not apply"):
        monty_patch.prepare(root)
    assert list((root / "rust" / "patched").iterdir()) == [], "a half-patched copy was left behind"


def test_no_patches_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(monty_patch.PatchError, match=r"no monty-types-1\.4\.0-"):
        monty_patch.prepare(tmp_path)


@needs_cargo
def test_patch_script_prepares_the_checkout() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "patch_monty.py")], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    for name in monty_patch.CRATES:
        assert (ROOT / _patched_path(ROOT, name) / ".codeact-patched").exists()
