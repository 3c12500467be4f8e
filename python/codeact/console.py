"""A rich console printer for agent events (``pip install 'codeact[cli]'`` for rich).

``EventPrinter()(event)`` prints one event: the author, model text as Markdown (so the
script's code fence is syntax-highlighted; an ``executable_code`` part not shown by the text
is printed as Python), the script's result (``code_execution_result``: outcome and stdout,
with the feedback sent to the model), tool calls (``function_call`` parts) and results
(``function_response`` parts), state changes, confirmation requests and errors::

    printer = EventPrinter()
    async for event in runner.run_async(user_id="u", session_id="s", new_message="hi"):
        printer(event)
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.markdown import Markdown
from rich.panel import Panel
from rich.syntax import Syntax
from rich.text import Text

from .events import Event

__all__ = ("EventPrinter", "print_events")

_MAX_VALUE_CHARS = 2000


def _short(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _MAX_VALUE_CHARS else text[:_MAX_VALUE_CHARS] + " ..."


class EventPrinter:
    """Prints events to a rich ``Console``.

    Args:
        console: where to print (default: a new ``Console()`` on stdout).
        show_thoughts: also print reasoning parts (``thought=True``), dimmed.
        show_state: print each event's ``state_delta``.
        show_empty: print events without content or actions (checkpoints) as one dim line.
    """

    def __init__(
        self,
        console: Console | None = None,
        *,
        show_thoughts: bool = False,
        show_state: bool = True,
        show_empty: bool = False,
    ) -> None:
        self.console = console if console is not None else Console()
        self.show_thoughts = show_thoughts
        self.show_state = show_state
        self.show_empty = show_empty
        self._live: str | None = None  # the kind of partial events being printed as they come

    def render(self, event: Event) -> RenderableType | None:
        """The renderable for ``event``, or None when there is nothing to show."""
        body: list[RenderableType] = []
        content = event.content
        for part in content.parts if content is not None else []:
            if part.thought:
                if self.show_thoughts and part.text:
                    body.append(Text(part.text, style="dim italic"))
            elif part.function_call is not None:
                call = part.function_call
                body.append(Text.assemble(("→ ", "cyan"), (call.name, "bold cyan"), f"({_short(call.args)})"))
            elif part.function_response is not None:
                resp = part.function_response
                body.append(Text.assemble(("← ", "green"), (resp.name, "bold green"), f": {_short(resp.response)}"))
            elif part.executable_code is not None:
                code = part.executable_code.code
                texts = "".join(p.text or "" for p in content.parts if p is not part) if content is not None else ""
                if code.strip() not in texts:  # a fenced block in the reply shows it already
                    body.append(Syntax(code, "python", line_numbers=True))
            elif part.code_execution_result is not None:
                result = part.code_execution_result
                ok = result.outcome == "OUTCOME_OK"
                body.append(Text(f"script {'ended' if ok else result.outcome}", style="green" if ok else "red"))
                shown = "".join(p.text or "" for p in content.parts) if content is not None else ""
                if result.output and result.output.strip() not in shown:  # the feedback shows it already
                    body.append(Text(result.output.rstrip("\n"), style="dim"))
            elif part.text:
                if event.author == "user" or event.kind == "script_result":
                    body.append(Text(part.text, style="dim" if event.kind else ""))
                else:
                    body.append(Markdown(part.text))
        actions = event.actions
        if self.show_state and actions.state_delta:
            body.append(Text(f"state Δ {_short(actions.state_delta)}", style="magenta"))
        for key, ask in actions.requested_tool_confirmations.items():
            body.append(
                Text.assemble(
                    ("approval needed: ", "bold yellow"), f"{ask.tool_name}({_short(ask.args)}) ", (f"[{key}]", "dim")
                )
            )
        if actions.transfer_to_agent:
            body.append(Text(f"transfer to {actions.transfer_to_agent}", style="blue"))
        if event.long_running_tool_ids:
            body.append(Text(f"waiting for {', '.join(event.long_running_tool_ids)}", style="yellow"))
        if event.error_code:
            body.append(Text(f"error {event.error_code}: {event.error_message or ''}", style="bold red"))
        if not body:
            return Text(f"[{event.author}] ·", style="dim") if self.show_empty else None
        style = "red" if event.error_code else ("blue" if event.author == "user" else "white")
        title = event.author if event.kind is None else f"{event.author} · {event.kind.replace('_', ' ')}"
        usage = event.usage_metadata
        if usage is not None and usage.total_token_count is not None:
            title += f" · {usage.total_token_count} tokens"
        return Panel(Group(*body), title=title, title_align="left", border_style=style)

    def __call__(self, event: Event) -> None:
        """Prints ``event``. A partial event (``RunConfig(streaming=True)``) is printed as it
        comes, its text written raw (the reply) or dimmed (printed output) with no panel; the
        complete model reply after a streamed one is shown as its title line only (its text
        was just printed)."""
        if event.partial:
            self._print_live(event)
            return
        streamed = self._live == "model_reply" and event.kind == "model_reply"
        if self._live is not None:
            self.console.file.write("\n")
            self._live = None
        if streamed:
            title = f"{event.author} · model reply"
            usage = event.usage_metadata
            if usage is not None and usage.total_token_count is not None:
                title += f" · {usage.total_token_count} tokens"
            self.console.print(Text(f"── {title}", style="dim"))
            return
        renderable = self.render(event)
        if renderable is not None:
            self.console.print(renderable)

    def _print_live(self, event: Event) -> None:
        kind = event.kind or "model_reply"
        if self._live != kind:
            if self._live is not None:
                self.console.file.write("\n")
            self.console.print(Text(f"{event.author} · {kind.replace('_', ' ')} (live)", style="dim"))
            self._live = kind
        text = event.text
        if kind == "script_output":
            self.console.print(Text(text, style="dim"), end="")
        else:
            self.console.file.write(text)
        self.console.file.flush()

    def script(self, code: str, *, title: str = "script") -> None:
        """Prints a script with Python highlighting (for callers that hold the script text)."""
        self.console.print(Panel(Syntax(code, "python", line_numbers=True), title=title, title_align="left"))


def print_events(events: Iterable[Event], console: Console | None = None, **options: Any) -> None:
    """Prints each event of ``events`` with an ``EventPrinter``."""
    printer = EventPrinter(console, **options)
    for event in events:
        printer(event)
