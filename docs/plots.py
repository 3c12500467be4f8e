"""Draws the benchmark plots of the docs site from the benchmark JSON files (matplotlib).

Reads ``docs/data/*.json`` (written by ``benchmarks/*.py --json``) and writes PNGs into
``docs/img/``. Run by ``make docs`` before ``mkdocs build``.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

DOCS = Path(__file__).resolve().parent


def integrations(data: dict, out: Path) -> None:
    columns = {name: col for name, col in data["columns"].items() if col is not None}
    names = list(columns)
    values = [columns[n]["per_call_us"] for n in names]
    fig, ax = plt.subplots(figsize=(7, 2.6))
    bars = ax.barh(names, values, color=["#2e7d32", "#81c784", "#9e9e9e"][: len(names)])
    ax.set_xscale("log")
    ax.set_xlabel(f"microseconds per tool call (log scale; {data['calls']} calls per script)")
    ax.invert_yaxis()
    for bar, value in zip(bars, values, strict=True):
        ax.text(bar.get_width() * 1.1, bar.get_y() + bar.get_height() / 2, f"{value:.1f} µs", va="center")
    ax.set_xlim(left=1, right=max(values) * 8)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main() -> None:
    img = DOCS / "img"
    img.mkdir(exist_ok=True)
    source = DOCS / "data" / "integrations.json"
    if source.exists():
        integrations(json.loads(source.read_text()), img / "integrations.png")
        print(f"wrote {img / 'integrations.png'}")


if __name__ == "__main__":
    main()
