"""Skills: an index from a folder of SKILL.md files, the best match for the message
selected by the documented policy, injected first within the character budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from codeact import CodeActAgent, MontyRuntime, Runner, ScriptedModel
from codeact.skills import SkillIndex, SkillPolicy, parse_skill
from parity_helpers import APP, ask, final

pytestmark = pytest.mark.anyio


def write_skills(root: Path) -> None:
    (root / "csv").mkdir(parents=True)
    (root / "csv" / "SKILL.md").write_text(
        "---\nname: csv-cleanup\ndescription: Clean messy CSV files.\ntags: [csv, data]\n---\n"
        + "Strip whitespace in every column. " * 100
    )
    (root / "nested" / "email").mkdir(parents=True)
    (root / "nested" / "email" / "SKILL.md").write_text(
        "---\ndescription: Write polite emails\ntags:\n  - email\n  - writing\n---\nBe brief."
    )


async def test_best_skill_is_selected_and_truncated(service, tmp_path: Path) -> None:
    write_skills(tmp_path)
    model = ScriptedModel([final("ok"), final("ok"), final("ok")])
    agent = CodeActAgent(
        name="c", model=model, runtime=MontyRuntime(), skills=tmp_path, skill_budget=300, instruction="RULES"
    )
    runner = Runner(app_name=APP, agent=agent, session_service=service)
    await ask(runner, "please clean my csv data", session="a")
    prompt = model.requests[0].system_instruction
    assert prompt.startswith("[skill:csv-cleanup]\nClean messy CSV files.")
    block = prompt.split("\n\nRULES")[0]
    assert len(block) == 300 and block.endswith("…[truncated]")
    assert "[skill:email]" not in prompt

    await ask(runner, "draft an email to the team", session="b")
    assert model.requests[1].system_instruction.startswith("[skill:email]\nWrite polite emails\n\nBe brief.")

    await ask(runner, "what time is it", session="c")
    assert "[skill:" not in model.requests[2].system_instruction


def test_scoring_policy_is_documented_and_deterministic(tmp_path: Path) -> None:
    write_skills(tmp_path)
    index = SkillIndex.from_dir(tmp_path)
    assert [s.name for s in index.skills] == ["csv-cleanup", "email"]
    assert index.skills[1].tags == ("email", "writing")
    # name word 3 + tag 2 + description 1 ("messy")
    (m,) = index.select("csv data messy")
    assert (m.skill.name, m.score) == ("csv-cleanup", 6.0)
    both = index.select("csv email", SkillPolicy(top_k=5))
    assert [x.skill.name for x in both] == ["csv-cleanup", "email"]
    assert index.select("body only: whitespace", SkillPolicy(min_score=1.0)) == []
    assert parse_skill("no front matter", default_name="x").body == "no front matter"
