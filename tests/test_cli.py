"""The ``codeact`` command line: run, chat, sessions (typer's CliRunner, real Monty, real SQLite)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("typer", reason="codeact[cli] is not installed")
from typer.testing import CliRunner

from codeact import Runner, SqliteSessionService
from codeact.cli import app, parse_mount
from codeact.runtime import PathAccess

cli = CliRunner()
CHAT = ["chat", "--model-from", "cli_fixtures:MODEL", "--tools", "cli_fixtures:TOOL_LIST"]


def write(tmp_path: Path, code: str, name: str = "job.py") -> Path:
    path = tmp_path / name
    path.write_text(code)
    return path


def test_run_prints_output_and_value(tmp_path):
    script = write(tmp_path, 'print("hi")\n[n * 2 for n in range(3)]')
    result = cli.invoke(app, ["run", str(script)])
    assert result.exit_code == 0, result.output
    assert result.stdout == "hi\n[0, 2, 4]\n"


def test_run_json_with_inputs_and_tools(tmp_path):
    script = write(
        tmp_path, 'print(name)\n{"d": call_tool("double", {"x": n}), "g": call_tool("greet", {"name": name})}'
    )
    args = ["run", str(script), "--json", "-i", "n=21", "-i", "name=ada", "--tools", "cli_fixtures:TOOLS"]
    result = cli.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "ok": True,
        "value": {"d": 42, "g": "hello ada"},
        "stdout": "ada\n",
        "stderr": "",
        "tool_calls": 2,
    }


def test_run_writes_the_scripts_stderr_to_stderr(tmp_path):
    script = write(tmp_path, "import sys\nprint('out')\nprint('warn', file=sys.stderr)\n1")
    result = cli.invoke(app, ["run", str(script)])
    assert result.exit_code == 0, result.output
    assert result.stdout == "out\n1\n" and result.stderr == "warn\n"
    payload = json.loads(cli.invoke(app, ["run", str(script), "--json"]).stdout)
    assert (payload["stdout"], payload["stderr"]) == ("out\n", "warn\n")


def test_run_with_mounts(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "in.txt").write_text("3 4 5")
    out = tmp_path / "out"
    out.mkdir()
    code = (
        "from pathlib import Path\n"
        'nums = [int(x) for x in Path("/data/in.txt").read_text().split()]\n'
        'Path("/out/sum.txt").write_text(str(sum(nums)))\n'
        "try:\n"
        '    Path("/data/new.txt").write_text("x")\n'
        "    denied = False\n"
        "except PermissionError:\n"
        "    denied = True\n"
        "[sum(nums), denied]"
    )
    script = write(tmp_path, code)
    result = cli.invoke(app, ["run", str(script), "--mount", f"/data={data}:ro", "--mount", f"/out={out}:rw", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["value"] == [12, True]
    assert (out / "sum.txt").read_text() == "12" and not (data / "new.txt").exists()


def test_parse_mount():
    m = parse_mount("/d=.:rw")
    assert (m.virtual_path, m.access) == ("/d", PathAccess.READ_WRITE) and m.host_path == Path(".").resolve()
    assert parse_mount("/d=.").access is PathAccess.READ_ONLY


def test_run_failure_exits_1_with_the_traceback(tmp_path):
    script = write(tmp_path, 'print("before")\nx = {}\nx["missing"]', name="bad.py")
    result = cli.invoke(app, ["run", str(script)])
    assert result.exit_code == 1
    assert result.stdout == "before\n"
    assert 'File "bad.py", line 3' in result.stderr and "KeyError" in result.stderr
    as_json = cli.invoke(app, ["run", str(script), "--json"])
    payload = json.loads(as_json.stdout)
    assert as_json.exit_code == 1 and payload["ok"] is False and "KeyError" in payload["error"]


def test_bad_usage_exits_2(tmp_path):
    script = write(tmp_path, "1")
    assert cli.invoke(app, ["run", str(script), "--mount", "nonsense"]).exit_code == 2
    assert cli.invoke(app, ["run", str(script), "--mount", f"relative={tmp_path}"]).exit_code == 2
    assert cli.invoke(app, ["run", str(tmp_path / "missing.py")]).exit_code == 2
    assert cli.invoke(app, ["chat", "--model", "x", "--model-from", "cli_fixtures:MODEL", "-m", "hi"]).exit_code == 2


@pytest.mark.parametrize(
    ("source", "fragment"),
    [("tools = 5", "is of type int"), ('tools = {"a": 5}', "maps 'a' to a value of type int"), ("", "no attribute")],
)
def test_run_tools_that_are_not_a_dict_of_callables_is_bad_usage(tmp_path, monkeypatch, source, fragment):
    module = f"badtools_{abs(hash(source))}"  # one module per case: imports are cached
    (tmp_path / f"{module}.py").write_text(source + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    script = write(tmp_path, "1")
    result = cli.invoke(app, ["run", str(script), "--tools", f"{module}:tools"])
    assert result.exit_code == 2 and not isinstance(result.exception, (TypeError, AttributeError))
    assert "Invalid value" in result.stderr and result.stdout == ""
    as_json = cli.invoke(app, ["run", str(script), "--tools", f"{module}:tools", "--json"])
    payload = json.loads(as_json.stdout)
    assert as_json.exit_code == 2 and payload["ok"] is False
    assert payload["error"].startswith("Invalid value") and fragment in payload["error"]


def test_the_module_runs_as_the_codeact_command(tmp_path):
    script = write(tmp_path, "6 * 7")
    proc = subprocess.run(
        [sys.executable, "-m", "codeact.cli", "run", str(script)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "42\n"


def test_chat_then_sessions_list_and_show(tmp_path):
    db = tmp_path / "s.db"
    result = cli.invoke(
        app,
        [*CHAT, "--db", str(db), "--session", "s1", "-m", "what is 40+2?"],
    )
    assert result.exit_code == 0, result.output
    assert "42" in result.stdout and "session s1" in result.stderr
    listed = cli.invoke(app, ["sessions", "list", "--db", str(db)])
    assert listed.exit_code == 0 and "s1" in listed.stdout and "cli" in listed.stdout
    shown = cli.invoke(app, ["sessions", "show", "s1", "--db", str(db)])
    assert shown.exit_code == 0 and "what is 40+2?" in shown.stdout and "42" in shown.stdout
    as_json = cli.invoke(app, ["sessions", "show", "s1", "--db", str(db), "--json"])
    assert json.loads(as_json.stdout)["id"] == "s1"
    missing = cli.invoke(app, ["sessions", "show", "nope", "--db", str(db)])
    assert missing.exit_code == 1 and "no session 'nope'" in missing.stderr


def test_chat_reads_lines_until_eof():
    result = cli.invoke(
        app, ["chat", "--model-from", "cli_fixtures:MODEL", "--tools", "cli_fixtures:TOOL_LIST"], input="one\ntwo\n"
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.count("42") == 2


async def _suspend(db: Path) -> None:
    import cli_fixtures

    service = SqliteSessionService(db)
    runner = Runner(
        app_name="codeact", agent=cli_fixtures.GATED_AGENT, session_service=service, auto_create_session=True
    )
    async for _ in runner.run_async(user_id="cli", session_id="g1", new_message="send 5"):
        pass
    service.close()


@pytest.mark.parametrize("verb", ["approve", "deny"])
def test_pending_then_approve_or_deny(tmp_path, verb):
    import anyio

    import cli_fixtures

    db = tmp_path / "g.db"
    anyio.run(_suspend, db)
    pending = cli.invoke(app, ["sessions", "pending", "g1", "--db", str(db), "--json"])
    assert pending.exit_code == 0, pending.output
    [item] = json.loads(pending.stdout)
    assert (item["tool"], item["args"], item["kind"]) == ("send", {"amount": 5}, "confirmation")
    cli_fixtures.SENT.clear()
    decided = cli.invoke(app, ["sessions", verb, "g1", "--db", str(db), "--agent", "cli_fixtures:GATED_AGENT"])
    assert decided.exit_code == 0, decided.output
    assert cli_fixtures.SENT == ([5] if verb == "approve" else [])
    assert ("sent 5" if verb == "approve" else "not sent") in decided.stdout
    assert json.loads(cli.invoke(app, ["sessions", "pending", "g1", "--db", str(db), "--json"]).stdout) == []


def test_host_failures_end_with_one_error_line_not_a_traceback(tmp_path: Path) -> None:
    """A script that is not UTF-8 and a store that is not a database: exit status 1 and an
    error line naming the problem, no traceback."""
    script = tmp_path / "bad.py"
    script.write_bytes(b'x = "\xff"\n')
    not_a_db = tmp_path / "notdb.db"
    not_a_db.write_text("not a database")
    for args, expected in (
        (["run", str(script)], "UnicodeDecodeError"),
        (["sessions", "list", "--db", str(not_a_db)], "SessionStoreError"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "codeact.cli", *args], capture_output=True, text=True, timeout=120, cwd=tmp_path
        )
        assert done.returncode == 1, done
        assert expected in done.stderr, done.stderr
        assert "Traceback" not in done.stderr + done.stdout


# ------------------------------------------------------------------ approvals inside chat (a real terminal)

TESTS = Path(__file__).resolve().parent
ANSI = __import__("re").compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def chat_in_terminal(args: list[str], steps: list[tuple[str, str]], timeout: float = 90) -> tuple[str, int]:
    """Runs ``codeact chat`` on a pseudo-terminal: for each (expected, reply), waits until the
    output shows ``expected`` and types ``reply``. Returns all output (ANSI codes removed) and
    the exit status."""
    import os
    import pty
    import select
    import time

    master, slave = pty.openpty()
    env = {
        **os.environ,
        # the fixtures only: codeact is imported as installed (the wheel in CI), not from the tree
        "PYTHONPATH": str(TESTS),
        "NO_COLOR": "1",
        "TERM": "dumb",
        "COLUMNS": "200",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "codeact.cli", "chat", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=TESTS,
        env=env,
    )
    os.close(slave)
    seen = ""
    deadline = time.monotonic() + timeout

    def read_some() -> bool:
        nonlocal seen
        ready, _, _ = select.select([master], [], [], 0.2)
        if not ready:
            return True
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            return False
        seen += ANSI.sub("", chunk.decode(errors="replace"))
        return bool(chunk)

    try:
        for expected, reply in steps:
            start = len(seen)
            while expected not in seen[max(0, start - 200) :]:
                assert time.monotonic() < deadline, f"never saw {expected!r}; output so far:\n{seen}"
                assert read_some() or expected in seen, f"chat ended before {expected!r}:\n{seen}"
            os.write(master, (reply + "\n").encode())
        while time.monotonic() < deadline and read_some():
            pass
        return seen, proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)


GATED_CHAT = ["--model-from", "cli_fixtures:GATED_MODEL", "--tools", "cli_fixtures:GATED_TOOLS"]


def test_chat_approves_a_paused_call_at_the_prompt(tmp_path):
    db = tmp_path / "c.db"
    out, status = chat_in_terminal(
        [*GATED_CHAT, "--db", str(db), "--session", "t1"],
        [("you>", "please send 5"), ("approve send", "yes, approve"), ("you>", "")],
    )
    assert status == 0, out
    assert "sent 5" in out and "CallsPendingError" not in out
    assert json.loads(cli.invoke(app, ["sessions", "pending", "t1", "--db", str(db), "--json"]).stdout) == []


def test_chat_denies_with_a_reason_and_completes_a_long_running_call(tmp_path):
    out, status = chat_in_terminal(
        GATED_CHAT,
        [
            ("you>", "send 5"),
            ("approve send", "no, too much"),
            ("you>", "start the job"),
            ("result of long-running start_job", '{"rows": 7}'),
            ("you>", ""),
        ],
    )
    assert status == 0, out
    assert "not sent" in out  # the script got PermissionError, the model answered
    assert "'rows': 7" in out or '"rows": 7' in out


def test_chat_that_leaves_a_call_pending_prints_the_exact_sessions_command(tmp_path):
    import shlex

    import cli_fixtures

    db = tmp_path / "c.db"
    result = cli.invoke(
        app, ["chat", *GATED_CHAT, "--db", str(db), "--session", "t3", "-m", "send 5", "-m", "and again"]
    )
    # the second message meets the paused call: one error line, not a traceback
    assert result.exit_code == 1 and "CallsPendingError" in result.stderr and "Traceback" not in result.output
    lines = [ln.strip() for ln in result.stdout.splitlines() if ln.strip().startswith("codeact sessions approve")]
    assert len(set(lines)) == 1  # shown at the pause, and again when the next message met it
    line = lines[0]
    argv = shlex.split(line)
    assert argv[:4] == ["codeact", "sessions", "approve", "t3"] and "--call" in argv
    cli_fixtures.SENT.clear()
    approved = cli.invoke(app, argv[1:])  # exactly what chat printed, minus the program name
    assert approved.exit_code == 0, approved.output
    assert cli_fixtures.SENT == [5] and "sent 5" in approved.stdout


def test_sessions_complete_finishes_a_long_running_call(tmp_path):
    db = tmp_path / "c.db"
    started = cli.invoke(app, ["chat", *GATED_CHAT, "--db", str(db), "--session", "t4", "-m", "start the job"])
    assert "codeact sessions complete t4" in started.stdout
    [item] = json.loads(cli.invoke(app, ["sessions", "pending", "t4", "--db", str(db), "--json"]).stdout)
    assert item["kind"] == "completion"
    done = cli.invoke(
        app,
        ["sessions", "complete", "t4", "--db", str(db), *GATED_CHAT, "--call", item["call_key"], "--value", "[1, 2]"],
    )
    assert done.exit_code == 0, done.output
    assert "[1, 2]" in done.stdout.replace("\n", "").replace(" ", "").replace("[1,2]", "[1, 2]")
    missing = cli.invoke(app, ["sessions", "approve", "t4", "--db", str(db)])
    assert missing.exit_code == 2 and "give --agent" in missing.output


def test_sessions_complete_with_an_error_fails_the_call_in_the_script(tmp_path):
    db = tmp_path / "c.db"
    cli.invoke(app, ["chat", *GATED_CHAT, "--db", str(db), "--session", "t5", "-m", "start the job"])
    [item] = json.loads(cli.invoke(app, ["sessions", "pending", "t5", "--db", str(db), "--json"]).stdout)
    base = ["sessions", "complete", "t5", "--db", str(db), *GATED_CHAT, "--call", item["call_key"]]
    for wrong in ([], ["--value", "1", "--error", "x"]):
        refused = cli.invoke(app, [*base, *wrong])
        assert refused.exit_code == 2 and "exactly one of --value and --error" in refused.output
    done = cli.invoke(app, [*base, "--error", "render farm down"])
    assert done.exit_code == 0, done.output
    assert "render farm down" in done.stdout
    assert json.loads(cli.invoke(app, ["sessions", "pending", "t5", "--db", str(db), "--json"]).stdout) == []


def test_chat_names_a_foreign_tool_object_in_one_line():
    pytest.importorskip("langchain_core", reason="the foreign tool object is a langchain tool (codeact[langchain])")
    result = cli.invoke(
        app, ["chat", "--model-from", "cli_fixtures:MODEL", "--tools", "cli_fixtures:FOREIGN", "-m", "x"]
    )
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "from_langchain" in result.output


def test_chat_prints_a_postgresql_url_without_its_password(tmp_path, monkeypatch):
    import codeact.cli as cli_module

    db = tmp_path / "c.db"
    url = "postgresql://alice:s3cr3t-pw@db.example:5432/app?sslmode=require&password=s3cr3t-pw"
    real = cli_module._session_service
    # No PostgreSQL server here: the URL is served by a SQLite file; what is printed is the subject.
    monkeypatch.setattr(cli_module, "_session_service", lambda given: real(db) if given == url else real(given))
    result = cli.invoke(app, ["chat", *GATED_CHAT, "--db", url, "--session", "t9", "-m", "send 5"])
    assert "codeact sessions approve t9" in result.stdout, result.output
    assert "s3cr3t-pw" not in result.output
    assert "--db 'postgresql://alice@db.example:5432/app?sslmode=require'" in result.stdout
    assert "without its password" in result.stderr


def test_shown_db_drops_only_the_password():
    from codeact.cli import _shown_db

    assert _shown_db("postgresql://u:p%40ss@h/db") == "postgresql://u@h/db"
    assert (
        _shown_db("postgres://u@h:5433/db?password=x&application_name=a") == "postgres://u@h:5433/db?application_name=a"
    )
    assert _shown_db("postgresql:///db") == "postgresql:///db"
    assert _shown_db("sessions.db") == "sessions.db"


def test_no_secret_of_a_postgresql_url_is_printed():
    """``sslpassword=`` is dropped like ``password=``; the Typer apps never print local
    variables in a traceback; an upper-case scheme reaches libpq in lower case, so its error
    does not quote the URL."""
    from codeact import cli

    assert cli._shown_db("postgresql://u@h/db?sslpassword=s2&sslmode=require") == "postgresql://u@h/db?sslmode=require"
    assert cli._shown_db("POSTGRESQL://u:secret@h/db") == "postgresql://u@h/db"
    assert cli.app.pretty_exceptions_show_locals is False
    assert cli.sessions_app.pretty_exceptions_show_locals is False
    pytest.importorskip("psycopg")
    service = cli._session_service("POSTGRESQL://u:secret@127.0.0.1:1/db?connect_timeout=1")
    assert service._conninfo.startswith("postgresql://")
    service.close()


def test_decide_approve_with_edited_args(tmp_path: Path) -> None:
    """``codeact sessions decide SESSION approve --args JSON --digest D`` (issue 49) runs the
    call with the edited arguments; without the digest, or with arguments the tool refuses,
    nothing runs and the call stays pending."""
    import anyio

    import cli_fixtures

    db = tmp_path / "g.db"
    anyio.run(_suspend, db)
    listed = ["sessions", "pending", "g1", "--db", str(db), "--json", "--agent", "cli_fixtures:GATED_AGENT"]
    [item] = json.loads(cli.invoke(app, listed).stdout)
    assert item["editable"] is True and "amount" in item["args_schema"]["properties"]
    cli_fixtures.SENT.clear()
    base = ["sessions", "decide", "g1", "approve", "--db", str(db), "--agent", "cli_fixtures:GATED_AGENT"]
    no_digest = cli.invoke(app, [*base, "--args", '{"amount": 2}'])
    assert no_digest.exit_code == 2 and "needs the digest" in no_digest.stderr
    bad = cli.invoke(app, [*base, "--args", '{"amount": "two"}', "--digest", item["digest"]])
    assert bad.exit_code == 1 and "DecisionValueError" in bad.stderr and "amount" in bad.stderr
    assert cli.invoke(app, [*base, "--args", "[1]", "--digest", item["digest"]]).exit_code == 2
    assert cli_fixtures.SENT == []
    done = cli.invoke(app, [*base, "--args", '{"amount": 2}', "--digest", item["digest"], "--actor", "ops"])
    assert done.exit_code == 0, done.output
    assert cli_fixtures.SENT == [2] and "sent 2" in done.stdout
