"""codeact's in-tree PEP 517 build backend: maturin, after preparing the patched Monty crate.

``pyproject.toml`` names it (``build-backend = "codeact_build"``, ``backend-path =
["build_backend"]``), so ``pip install .``, ``pip install -e .``, ``python -m build`` and
``pip install codeact-*.tar.gz`` need no pre-step: every hook first runs
:func:`codeact_build.monty_patch.prepare`, which fetches the published ``monty-types`` and
``monty`` crates with cargo, applies ``rust/patches/`` to copies under ``rust/patched/`` and points
``.cargo/config.toml``'s ``[patch.crates-io]`` at them, then hands over to maturin's own hooks.

Cargo profiles: a wheel (``pip install .``, ``python -m build``, the sdist) is built with the
``release`` profile (fat LTO); an editable install (``pip install -e .``) with ``dev-release``
(no cross-crate LTO, more codegen units: about half the build time). Arguments given to maturin
(``MATURIN_PEP517_ARGS`` or the ``maturin.build-args`` config setting) win, for example
``MATURIN_PEP517_ARGS="--profile dev-release" pip install .``.

The sdist never carries Monty's source: :func:`build_sdist` checks that ``rust/patched`` is
not in it.
"""

from __future__ import annotations

import os
import shutil
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import maturin

from . import monty_patch

__all__ = (
    "build_editable",
    "build_sdist",
    "build_wheel",
    "get_requires_for_build_editable",
    "get_requires_for_build_sdist",
    "get_requires_for_build_wheel",
    "prepare_metadata_for_build_editable",
    "prepare_metadata_for_build_wheel",
)

EDITABLE_PROFILE = "dev-release"

get_requires_for_build_wheel = maturin.get_requires_for_build_wheel
get_requires_for_build_editable = maturin.get_requires_for_build_editable
get_requires_for_build_sdist = maturin.get_requires_for_build_sdist


def _prepare() -> None:
    """Puts cargo on PATH the way maturin would (``puccinialin``), then patches the crate."""
    if not os.environ.get("MATURIN_NO_INSTALL_RUST") and not shutil.which("cargo"):
        try:
            from puccinialin import setup_rust  # maturin's get_requires_* asks for it when cargo is missing
        except ImportError:
            pass
        else:
            print("Rust not found, installing into a temporary directory")
            os.environ.update(setup_rust())
    try:
        monty_patch.prepare(Path.cwd())
    except monty_patch.PatchError as exc:
        raise SystemExit(f"codeact build: {exc}") from exc


def _with_profile(config_settings: Mapping[str, Any] | None, profile: str) -> dict[str, Any]:
    """``config_settings`` with ``--profile profile`` added unless maturin's arguments choose one."""
    args = list(maturin.get_maturin_pep517_args(config_settings))
    if not any(a == "--profile" or a.startswith("--profile=") for a in args):
        args += ["--profile", profile]
    settings = {k: v for k, v in (config_settings or {}).items() if k not in ("build-args", "maturin.build-args")}
    settings["maturin.build-args"] = args
    return settings


def build_wheel(
    wheel_directory: str, config_settings: Mapping[str, Any] | None = None, metadata_directory: str | None = None
) -> str:
    """PEP 517 hook: the release wheel (fat LTO) into ``wheel_directory``; returns its file name."""
    _prepare()
    return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(
    wheel_directory: str, config_settings: Mapping[str, Any] | None = None, metadata_directory: str | None = None
) -> str:
    """PEP 660 hook: an editable wheel built with the ``dev-release`` profile unless told otherwise."""
    _prepare()
    return maturin.build_editable(wheel_directory, _with_profile(config_settings, EDITABLE_PROFILE), metadata_directory)


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Mapping[str, Any] | None = None) -> str:
    """PEP 517 hook: the ``.dist-info`` folder (maturin reads the workspace, so the crate is prepared first)."""
    _prepare()
    return maturin.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def prepare_metadata_for_build_editable(
    metadata_directory: str, config_settings: Mapping[str, Any] | None = None
) -> str:
    """PEP 660 hook: as :func:`prepare_metadata_for_build_wheel`."""
    _prepare()
    return maturin.prepare_metadata_for_build_editable(metadata_directory, config_settings)


def build_sdist(sdist_directory: str, config_settings: Mapping[str, Any] | None = None) -> str:
    """PEP 517 hook: the sdist (sources, patches, this backend; never Monty's source).

    Raises:
        SystemExit: the crate could not be prepared, or the sdist would carry ``rust/patched``.
    """
    _prepare()
    name = maturin.build_sdist(sdist_directory, config_settings)
    with tarfile.open(Path(sdist_directory) / name) as archive:
        vendored = [n for n in archive.getnames() if "/rust/patched/" in n or n.endswith("/rust/patched")]
    if vendored:
        (Path(sdist_directory) / name).unlink()
        raise SystemExit(f"codeact build: the sdist would carry the patched Monty source ({vendored[0]}, ...)")
    return name
