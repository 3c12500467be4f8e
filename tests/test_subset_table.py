"""The language-subset table is probed on the real interpreter, so the prompt cannot drift
from what the pinned Monty actually runs.

Every probe runs on two backends, through ``tools/probe_subset.py``:

- ``codeact``: codeact's own ``MontyRuntime`` (raw: no check, no rewrites). The table is measured
  on Monty 1.4.0, so this backend is skipped, saying so, while ``codeact._monty`` embeds an
  older Monty (the 0.0.19 engine, before the 1.4 port is merged);
- ``pydantic-monty``: the official binding of Monty 1.4.0 (the ``benchmark`` extra), skipped
  when it is not installed.

And every probe passes on CPython, so each one tests the construct and not a typo.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

from codeact import MontyRuntime, _monty
from codeact.runtime._subset import MONTY_VERSION, STDLIB_MODULES, SUBSET, render_language_section
from conftest import REPO

sys.path.insert(0, str(REPO / "tools"))
import probe_subset


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:3] if part.isdigit())


CODEACT_ON_14 = _version(_monty.MONTY_VERSION) >= _version(MONTY_VERSION)
HAS_PYDANTIC_MONTY = importlib.util.find_spec("pydantic_monty") is not None

BACKENDS = [
    pytest.param(
        "codeact",
        marks=pytest.mark.skipif(
            not CODEACT_ON_14,
            reason=f"codeact._monty embeds Monty {_monty.MONTY_VERSION}; the table is measured on "
            f"{MONTY_VERSION} (runs once the 1.4 port is merged)",
        ),
    ),
    pytest.param(
        "pydantic-monty",
        marks=pytest.mark.skipif(
            not HAS_PYDANTIC_MONTY, reason="pydantic-monty is not installed (pip install pydantic-monty==1.4.0)"
        ),
    ),
]
PROBES = probe_subset.probes()
_measured: dict[str, dict[str, str]] = {}


def outcomes(backend: str) -> dict[str, str]:
    """Every probe's outcome on ``backend`` (run once per test session)."""
    if backend not in _measured:
        results = probe_subset.BACKENDS[backend]([script for _, script, _ in PROBES])
        _measured[backend] = {name: result for (name, _, _), result in zip(PROBES, results, strict=True)}
    if backend == "pydantic-monty":
        import pydantic_monty

        assert _version(pydantic_monty.__version__) >= _version(MONTY_VERSION), pydantic_monty.__version__
    return _measured[backend]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("entry", [e for e in SUBSET if e.supported], ids=lambda e: e.construct[:60])
def test_supported_constructs_work(backend, entry):
    assert outcomes(backend)[entry.construct] == "True"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("entry", [e for e in SUBSET if not e.supported], ids=lambda e: e.key)
def test_unsupported_constructs_do_not_work(backend, entry):
    assert outcomes(backend)[entry.construct] != "True"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("module", STDLIB_MODULES)
def test_every_listed_module_imports(backend, module):
    assert outcomes(backend)[f"import {module}"] == "True"


def test_every_probe_but_third_party_passes_on_cpython():
    results = probe_subset.run_cpython([script for _, script, _ in PROBES])
    failed = {
        name: result
        for (name, _, _), result in zip(PROBES, results, strict=True)
        if result != "True" and name not in probe_subset._NOT_ON_CPYTHON
    }
    assert failed == {}


# ------------------------------------------------------------------ the prompt


@pytest.fixture(scope="module")
def prompt() -> str:
    return MontyRuntime().capabilities().prompt


def test_the_prompt_starts_with_the_rendered_language_section(prompt):
    assert prompt.startswith(render_language_section())


@pytest.mark.parametrize("entry", [e for e in SUBSET if not e.supported], ids=lambda e: e.key)
def test_the_prompt_names_each_unsupported_construct_and_its_alternative(prompt, entry):
    assert entry.instead, entry
    assert f"{entry.construct}. Instead: {entry.instead}." in prompt


@pytest.mark.parametrize("entry", [e for e in SUBSET if e.supported], ids=lambda e: e.construct[:60])
def test_the_prompt_names_each_supported_construct(prompt, entry):
    assert entry.construct in prompt


def test_the_prompt_lists_every_importable_module(prompt):
    assert "Importable standard library: " + ", ".join(STDLIB_MODULES) + "." in prompt


def test_probes_and_constructs_are_distinct():
    probes = [e.probe for e in SUBSET]
    assert len(set(probes)) == len(probes)
    constructs = [e.construct for e in SUBSET]
    assert len(set(constructs)) == len(constructs)
    keys = [e.key for e in SUBSET if e.key]
    assert len(set(keys)) == len(keys)
    assert all(e.key for e in SUBSET if not e.supported)


def test_the_measured_table_in_the_docs_is_current():
    """docs/subset-probes.md lists every probe of the table (regenerate with
    ``python tools/probe_subset.py --backend pydantic-monty --backend codeact --write``)."""
    text = (REPO / "docs" / "subset-probes.md").read_text(encoding="utf-8")
    for name, _, _ in PROBES:
        assert f"| {name.replace('|', '/')} |" in text, name
