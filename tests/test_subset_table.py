"""The language-subset table is probed on the real interpreter, so the prompt cannot drift
from what the pinned Monty actually runs."""

from __future__ import annotations

import pytest

from codeact import Complete, MontyRuntime
from codeact.runtime._subset import STDLIB_MODULES, SUBSET
from conftest import start


@pytest.fixture(scope="module")
def rt() -> MontyRuntime:
    return MontyRuntime(rewrite_scripts=False, check_scripts=False)  # the raw interpreter


@pytest.mark.parametrize("entry", [e for e in SUBSET if e.supported], ids=lambda e: e.construct)
def test_supported_constructs_work(rt, entry):
    step = start(rt, entry.probe)
    assert isinstance(step, Complete), step
    assert step.value is True


@pytest.mark.parametrize("entry", [e for e in SUBSET if not e.supported], ids=lambda e: e.construct)
def test_unsupported_constructs_do_not_work(rt, entry):
    step = start(rt, entry.probe)
    assert not (isinstance(step, Complete) and step.value is True), step


@pytest.mark.parametrize("entry", [e for e in SUBSET if not e.supported], ids=lambda e: e.construct)
def test_the_prompt_names_each_unsupported_construct_and_its_alternative(rt, entry):
    prompt = rt.capabilities().prompt
    assert entry.instead, entry
    assert entry.construct in prompt
    assert entry.instead in prompt


@pytest.mark.parametrize("entry", [e for e in SUBSET if e.supported], ids=lambda e: e.construct)
def test_the_prompt_names_each_supported_construct(rt, entry):
    assert entry.construct in rt.capabilities().prompt


@pytest.mark.parametrize("module", STDLIB_MODULES)
def test_every_listed_module_imports(rt, module):
    step = start(rt, f"import {module}\nTrue")
    assert isinstance(step, Complete) and step.value is True, step
    assert module in rt.capabilities().prompt


def test_probes_and_constructs_are_distinct():
    probes = [e.probe for e in SUBSET]
    assert len(set(probes)) == len(probes)
    constructs = [e.construct for e in SUBSET]
    assert len(set(constructs)) == len(constructs)
