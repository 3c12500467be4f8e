"""langchain-core tools in a CodeAct agent (codeact[langchain]).

Run: ``pip install 'codeact[langchain]' && python examples/langchain_tools/main.py``
"""

from __future__ import annotations

from langchain_core.tools import tool

from codeact import CodeActAgent, InMemorySessionService, MontyRuntime, Runner, ScriptedModel
from codeact.integrations.langchain import from_langchain


@tool
def word_count(text: str) -> int:
    """Counts the words in a text."""
    return len(text.split())


@tool
def repeat(text: str, times: int = 2) -> str:
    """Repeats a text."""
    return " ".join([text] * times)


SCRIPT = """```python
text = call_tool("repeat", {"text": "to be or not", "times": 3})
{"type": "final_result", "value": {"text": text, "words": call_tool("word_count", {"text": text})}}
```"""


def main() -> None:
    agent = CodeActAgent(
        name="words", model=ScriptedModel([SCRIPT]), runtime=MontyRuntime(), tools=from_langchain([word_count, repeat])
    )
    runner = Runner(app_name="words", agent=agent, session_service=InMemorySessionService(), auto_create_session=True)
    for event in runner.run(user_id="me", session_id="s1", new_message="Repeat and count."):
        if event.is_final_response():
            print(event.text)


if __name__ == "__main__":
    main()
