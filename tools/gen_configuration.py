"""Writes the option tables of docs/configuration.md from the fields of ``CodeActAgent`` and
``RunConfig`` (their ``Field(description=...)``), between the ``<!-- generated: ... -->``
markers; the prose around them is kept.

    python tools/gen_configuration.py           # rewrite docs/configuration.md
    python tools/gen_configuration.py --check   # exit 1 when the checked-in file differs

``make docs-check`` and tests/test_configuration_doc.py run the check.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from codeact.agent import CodeActAgent, RunConfig

DOC = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"
TABLES: dict[str, type[BaseModel]] = {"CodeActAgent": CodeActAgent, "RunConfig": RunConfig}


def _start(name: str) -> str:
    return f"<!-- generated: {name} options (python tools/gen_configuration.py) -->"


def _end(name: str) -> str:
    return f"<!-- end generated: {name} options -->"


def _default(info: Any) -> str:
    if info.is_required():
        return "required"
    if info.default_factory is not None:
        value = info.default_factory()
    elif info.default is PydanticUndefined:  # pragma: no cover - a field is required or has a default
        return "required"
    else:
        value = info.default
    text = json.dumps(value) if isinstance(value, str) else repr(value)
    return f"`{text}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def table(model: type[BaseModel]) -> str:
    """The markdown table of ``model``'s fields: option, default, description.

    Raises:
        ValueError: a field has no description.
    """
    lines = ["| Option | Default | Description |", "| --- | --- | --- |"]
    for name, info in model.model_fields.items():
        if not info.description:
            raise ValueError(f"{model.__name__}.{name} has no Field(description=...)")
        lines.append(f"| `{name}` | {_cell(_default(info))} | {_cell(info.description)} |")
    return "\n".join(lines)


def render(text: str) -> str:
    """``text`` (the doc) with each generated table replaced by the current one.

    Raises:
        ValueError: a table's markers are missing.
    """
    for name, model in TABLES.items():
        start, end = _start(name), _end(name)
        if start not in text or end not in text:
            raise ValueError(f"docs/configuration.md lacks the markers of the {name} table: {start} ... {end}")
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        text = f"{head}{start}\n{table(model)}\n{end}{tail}"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/configuration.md is out of date")
    args = parser.parse_args(argv)
    current = DOC.read_text(encoding="utf-8")
    wanted = render(current)
    if args.check:
        if current != wanted:
            print("docs/configuration.md is out of date: run python tools/gen_configuration.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
