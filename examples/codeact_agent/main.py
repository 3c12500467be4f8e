"""A CodeAct agent on CPythonRuntime with a scripted model: no sandbox, no model access.

The model (scripted here) writes one script per turn; the first composes two tools and
returns an observation, the second returns the final answer.

Run: ``python examples/codeact_agent/main.py``
"""

from __future__ import annotations

from codeact import CodeActAgent, CPythonRuntime, InMemorySessionService, Runner, ScriptedModel


def add(a: float, b: float) -> float:
    """Adds two numbers.

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b


def explain(expression: str, result: float) -> str:
    """Explains a calculation in words.

    Args:
        expression: the calculation, e.g. "40 + 2".
        result: its result.
    """
    return f"{expression} = {result:g}"


REPLIES = [
    """I will add the numbers and explain the result in one script.
```python
total = call_tool("add", {"a": 40, "b": 2})
text = call_tool("explain", {"expression": "40 + 2", "result": total})
print("computed", total)
{"type": "observation", "value": {"total": total, "text": text}}
```""",
    """```python
{"type": "final_result", "value": {"answer": 42, "explanation": "40 + 2 = 42"}}
```""",
]


def main() -> None:
    agent = CodeActAgent(
        name="calculator",
        model=ScriptedModel(REPLIES),
        runtime=CPythonRuntime(),
        tools=[add, explain],
        instruction="Answer arithmetic questions.",
    )
    runner = Runner(app_name="calc", agent=agent, session_service=InMemorySessionService(), auto_create_session=True)
    for event in runner.run(user_id="me", session_id="s1", new_message="What is 40 + 2?"):
        print(f"[{event.author}] {event.text or '(no text)'}")


if __name__ == "__main__":
    main()
