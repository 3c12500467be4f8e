"""docs/configuration.md's option tables are generated from the fields' descriptions
(tools/gen_configuration.py): the checked-in file must be what the generator writes."""

from __future__ import annotations

import sys

import pytest

from codeact.agent import CodeActAgent, RunConfig
from conftest import REPO

sys.path.insert(0, str(REPO / "tools"))
import gen_configuration


@pytest.mark.parametrize("model", [CodeActAgent, RunConfig])
def test_every_option_has_a_description(model) -> None:
    missing = [name for name, info in model.model_fields.items() if not info.description]
    assert missing == []


def test_the_checked_in_doc_is_the_generated_one() -> None:
    current = gen_configuration.DOC.read_text(encoding="utf-8")
    assert gen_configuration.render(current) == current, "run python tools/gen_configuration.py"


def test_each_option_is_a_row_with_its_default() -> None:
    text = gen_configuration.DOC.read_text(encoding="utf-8")
    assert "| `max_iterations` | `12` |" in text
    assert "| `model` | required |" in text
    assert '| `on_pending_message` | `"reject"` |' in text


def test_a_missing_description_or_marker_is_refused() -> None:
    from pydantic import BaseModel

    class Undocumented(BaseModel):
        x: int = 1

    with pytest.raises(ValueError, match=r"Undocumented\.x has no Field"):
        gen_configuration.table(Undocumented)
    with pytest.raises(ValueError, match="lacks the markers"):
        gen_configuration.render("no markers here")
