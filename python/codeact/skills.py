"""Skills: reusable know-how in ``SKILL.md`` files, injected into the prompt when relevant.

A skills folder holds one ``SKILL.md`` per skill (``<root>/<skill>/SKILL.md``, any depth),
each starting with front matter::

    ---
    name: csv-cleanup
    description: Clean and normalise CSV files before analysis.
    tags: [csv, data, cleaning]
    ---
    Step-by-step instructions for the model ...

``name`` defaults to the folder name; ``tags`` may be a ``[a, b]`` list, a comma list or a
YAML ``- item`` list.

Selection policy (``SkillPolicy``, documented and deterministic): the user's message is
split into lower-case words (letters and digits; words of one character and common English
stop words dropped). A skill scores, for each distinct query word, **3** if it is a word of
the skill's name, **2** if it is a tag (or a word of one), **1** if it occurs in the
description and **0.5** if it occurs only in the body. Skills scoring at least
``min_score`` (default 1.0) are ranked by score, ties by name, and the best ``top_k``
(default 1) are injected. Each injected skill is rendered as ``[skill:<name>]``, its
description and its body, truncated to the agent's ``skill_budget`` characters (default
2000; a cut ends with ``…[truncated]``); the block is the first section of the system prompt.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

__all__ = ("DEFAULT_SKILL_BUDGET", "Skill", "SkillIndex", "SkillMatch", "SkillPolicy", "parse_skill")

DEFAULT_SKILL_BUDGET = 2000
TRUNCATION_MARKER = "…[truncated]"

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an and are as at be but by can do for from has have how i in is it me my of on or our please "
    "should so that the this to us was we what when where which who why will with you your".split()
)


def words(text: str) -> list[str]:
    """Lower-case words of ``text`` minus one-letter words and stop words, in order."""
    return [w for w in _WORD.findall(text.lower()) if len(w) > 1 and w not in _STOP]


class Skill(BaseModel):
    """One skill.

    Attributes:
        name / description / tags: from the front matter.
        body: the instructions after the front matter.
        path: the file it came from (None when built in code).
    """

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    tags: tuple[str, ...] = ()
    body: str = ""
    path: Path | None = None

    def render(self, budget: int = DEFAULT_SKILL_BUDGET) -> str:
        """The prompt block, at most ``budget`` characters."""
        text = f"[skill:{self.name}]\n{self.description}\n\n{self.body}".rstrip()
        if len(text) <= budget:
            return text
        keep = max(0, budget - len(TRUNCATION_MARKER))
        return text[:keep] + TRUNCATION_MARKER


class SkillPolicy(BaseModel):
    """How skills are chosen for a message (see the module docstring for the scoring).

    Attributes:
        top_k: how many skills at most are injected.
        min_score: the lowest score that counts as a match.
    """

    top_k: int = Field(default=1, ge=0)
    min_score: float = Field(default=1.0, ge=0)


class SkillMatch(BaseModel):
    """A skill and its score for a query."""

    skill: Skill
    score: float


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _front_matter(text: str) -> tuple[dict[str, object], str]:
    """A tiny front-matter reader: ``key: value`` lines, ``[a, b]`` and ``- item`` lists."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        return {}, text
    meta: dict[str, object] = {}
    key: str | None = None
    for raw in lines[1:end]:
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        stripped = line.strip()
        if stripped.startswith("- ") and key is not None:
            current = meta.get(key)
            items = current if isinstance(current, list) else []
            items.append(_unquote(stripped[2:]))
            meta[key] = items
            continue
        if ":" not in line:
            continue
        key, _, value = line.partition(":")
        key = key.strip()
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            meta[key] = [_unquote(v) for v in value[1:-1].split(",") if v.strip()]
        else:
            meta[key] = _unquote(value) if value else []
    return meta, "\n".join(lines[end + 1 :]).strip()


def parse_skill(text: str, *, default_name: str = "", path: Path | None = None) -> Skill:
    """A ``Skill`` from the text of a ``SKILL.md``.

    Raises:
        ValueError: no name in the front matter and no ``default_name``.
    """
    meta, body = _front_matter(text)
    name = meta.get("name") or default_name
    if not isinstance(name, str) or not name:
        raise ValueError(f"skill {path or '<text>'} has no name")
    tags = meta.get("tags", [])
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",") if t.strip()]
    description = meta.get("description", "")
    return Skill(
        name=name,
        description=description
        if isinstance(description, str)
        else " ".join(str(d) for d in description)
        if isinstance(description, list)
        else "",
        tags=tuple(str(t) for t in tags) if isinstance(tags, list) else (),
        body=body,
        path=path,
    )


class SkillIndex:
    """A searchable set of skills.

    Args:
        skills: the skills; names must be unique.
    """

    def __init__(self, skills: Iterable[Skill] = ()) -> None:
        self.skills: list[Skill] = []
        seen: set[str] = set()
        for s in skills:
            if s.name in seen:
                raise ValueError(f"duplicate skill name: {s.name}")
            seen.add(s.name)
            self.skills.append(s)

    @classmethod
    def from_dir(cls, root: str | Path) -> SkillIndex:
        """Every ``SKILL.md`` under ``root`` (sorted by path).

        Raises:
            FileNotFoundError: ``root`` is not a directory.
        """
        base = Path(root)
        if not base.is_dir():
            raise FileNotFoundError(f"skills folder not found: {base}")
        return cls(
            parse_skill(p.read_text(encoding="utf-8"), default_name=p.parent.name, path=p)
            for p in sorted(base.rglob("SKILL.md"))
        )

    @staticmethod
    def score(skill: Skill, query_words: Sequence[str]) -> float:
        """The score of ``skill`` for the (already split) query words."""
        name = set(words(skill.name))
        tags = {t.lower() for t in skill.tags} | {w for t in skill.tags for w in words(t)}
        description = set(words(skill.description))
        body = set(words(skill.body))
        total = 0.0
        for w in set(query_words):
            if w in name:
                total += 3
            elif w in tags:
                total += 2
            elif w in description:
                total += 1
            elif w in body:
                total += 0.5
        return total

    def select(self, query: str, policy: SkillPolicy | None = None) -> list[SkillMatch]:
        """The best skills for ``query`` under ``policy`` (best first)."""
        policy = policy or SkillPolicy()
        q = words(query)
        matches = [SkillMatch(skill=s, score=self.score(s, q)) for s in self.skills]
        matches = [m for m in matches if m.score >= policy.min_score and m.score > 0]
        matches.sort(key=lambda m: (-m.score, m.skill.name))
        return matches[: policy.top_k]

    def __len__(self) -> int:
        return len(self.skills)
