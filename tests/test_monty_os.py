"""OS access on Monty: environment map, clock, mounts and their boundaries, and the
model-facing text that describes them (reference §18.6–18.7, §19.5; SPEC §3)."""

from __future__ import annotations

import datetime as dt
import os
import re

import pytest

from codeact import MontyRuntime, Mount, PathAccess, Tool
from conftest import expect_complete, expect_raised, last_line, start

# ------------------------------------------------------------------ environment


def test_getenv_returns_value_or_default():
    rt = MontyRuntime(environ={"PROJECT": "acme"})
    script = """
    import os
    [os.getenv("PROJECT"), os.getenv("PROJECT", "x"), os.getenv("MISSING", "fallback"), os.getenv("MISSING")]
    """
    assert expect_complete(start(rt, script)).value == ["acme", "acme", "fallback", None]


def test_empty_environment_returns_getenv_default_without_pausing(monty):
    assert expect_complete(start(monty, 'import os\nos.getenv("HOME", "unset")')).value == "unset"


def test_environ_projects_exactly_the_configured_map():
    rt = MontyRuntime(environ={"PROJECT": "acme", "REGION": "CA"})
    assert expect_complete(start(rt, "import os\ndict(os.environ)")).value == {"PROJECT": "acme", "REGION": "CA"}
    assert expect_complete(start(rt, 'import os\nos.environ["REGION"]')).value == "CA"


def test_empty_environ_is_empty(monty):
    assert expect_complete(start(monty, "import os\ndict(os.environ)")).value == {}


def test_host_environment_is_never_visible(monkeypatch):
    monkeypatch.setenv("CODEACT_TEST_HOST_SECRET", "hunter2")
    assert os.environ["CODEACT_TEST_HOST_SECRET"] == "hunter2"
    rt = MontyRuntime(environ={"PROJECT": "acme"})
    script = """
    import os
    [os.getenv("CODEACT_TEST_HOST_SECRET", "invisible"), os.getenv("PATH"), os.getenv("HOME"),
     "CODEACT_TEST_HOST_SECRET" in os.environ, sorted(os.environ)]
    """
    assert expect_complete(start(rt, script)).value == ["invisible", None, None, False, ["PROJECT"]]


def test_environ_values_must_be_strings():
    with pytest.raises(ValueError):
        MontyRuntime(environ={"A": 1})  # type: ignore[dict-item]


# ------------------------------------------------------------------ clock


def test_enabled_clock_returns_the_host_date(monty):
    before = dt.date.today()
    value = expect_complete(
        start(monty, "from datetime import date\nd = date.today()\n[type(d).__name__, str(d)]")
    ).value
    after = dt.date.today()
    assert value[0] == "date"
    assert value[1] in {before.isoformat(), after.isoformat()}


def test_enabled_clock_returns_the_host_datetime(monty):
    script = "from datetime import datetime\nd = datetime.now()\n[isinstance(d, datetime), d.isoformat()]"
    is_datetime, text = expect_complete(start(monty, script)).value
    assert is_datetime is True
    assert abs((dt.datetime.fromisoformat(text) - dt.datetime.now()).total_seconds()) < 5


def test_enabled_clock_honours_a_fixed_offset(monty):
    script = "from datetime import datetime, timezone\ndatetime.now(timezone.utc).isoformat()"
    text = expect_complete(start(monty, script)).value
    now = dt.datetime.fromisoformat(text)
    assert now.utcoffset() == dt.timedelta(0)
    assert abs((now - dt.datetime.now(dt.timezone.utc)).total_seconds()) < 5


@pytest.mark.parametrize("call", ["date.today()", "datetime.now()"])
def test_disabled_clock_refuses_date_calls(call):
    rt = MontyRuntime(system_clock=False)
    raised = expect_raised(start(rt, f"from datetime import date, datetime\n{call}"))
    assert last_line(raised.message).startswith("OSError")
    assert "clock" in last_line(raised.message)
    caught = (
        f"from datetime import date, datetime\ntry:\n    {call}\n    r = 'no'\nexcept OSError:\n    r = 'caught'\nr"
    )
    assert expect_complete(start(rt, caught)).value == "caught"


# ------------------------------------------------------------------ filesystem

EXISTENCE_CHECKS = ["exists", "is_file", "is_dir", "is_symlink"]


def test_unmounted_read_is_a_permission_error(monty):
    raised = expect_raised(start(monty, 'from pathlib import Path\nPath("/etc/passwd").read_text()'))
    assert last_line(raised.message).startswith("PermissionError")


@pytest.mark.parametrize("check", EXISTENCE_CHECKS)
def test_unmounted_existence_checks_are_false(monty, check):
    assert expect_complete(start(monty, f'from pathlib import Path\nPath("/etc/passwd").{check}()')).value is False


def test_unmounted_write_is_a_permission_error(monty, tmp_path):
    target = tmp_path / "x.txt"
    raised = expect_raised(start(monty, f"from pathlib import Path\nPath({str(target)!r}).write_text('x')"))
    assert last_line(raised.message).startswith("PermissionError")
    assert not target.exists()


@pytest.fixture
def data_dir(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    (d / "note.txt").write_text("hello from host")
    (d / "sub").mkdir()
    (d / "sub" / "deep.txt").write_text("deep")
    (tmp_path / "secret.txt").write_text("outside")
    return d


def ro(host) -> MontyRuntime:
    return MontyRuntime(mounts=[Mount(virtual_path="/data", host_path=host, access=PathAccess.READ_ONLY)])


def rw(host) -> MontyRuntime:
    return MontyRuntime(mounts=[Mount(virtual_path="/data", host_path=host, access=PathAccess.READ_WRITE)])


def test_mount_defaults_to_read_only(data_dir):
    assert Mount(virtual_path="/data", host_path=data_dir).access is PathAccess.READ_ONLY


def test_granted_read_path_is_readable_in_place(data_dir):
    rt = ro(data_dir)
    script = """
    from pathlib import Path
    [Path("/data/note.txt").read_text(), Path("/data/sub/deep.txt").read_text(),
     sorted(p.name for p in Path("/data").iterdir())]
    """
    assert expect_complete(start(rt, script)).value == ["hello from host", "deep", ["note.txt", "sub"]]


@pytest.mark.parametrize(
    "write",
    [
        'Path("/data/new.txt").write_text("x")',
        'Path("/data/new.txt").write_bytes(b"x")',
        'Path("/data/note.txt").append_text("x")',
        'Path("/data/new").mkdir()',
        'Path("/data/note.txt").unlink()',
        'Path("/data/note.txt").rename("/data/new.txt")',
        'Path("/data/new.txt").open("w")',
    ],
)
def test_read_only_mount_refuses_writes(data_dir, write):
    before = sorted(p.name for p in data_dir.rglob("*"))
    raised = expect_raised(start(ro(data_dir), f"from pathlib import Path\n{write}"))
    assert last_line(raised.message).startswith("PermissionError")
    assert sorted(p.name for p in data_dir.rglob("*")) == before
    assert (data_dir / "note.txt").read_text() == "hello from host"


def test_read_write_mount_creates_the_host_file(data_dir):
    rt = rw(data_dir)
    done = expect_complete(start(rt, 'from pathlib import Path\nPath("/data/out.txt").write_text("from script")\n1'))
    assert done.value == 1
    assert (data_dir / "out.txt").read_text() == "from script"


@pytest.mark.parametrize("make", [ro, rw])
def test_dotdot_traversal_out_of_a_mount_is_refused(data_dir, make):
    rt = make(data_dir)
    raised = expect_raised(start(rt, 'from pathlib import Path\nPath("/data/../secret.txt").read_text()'))
    assert last_line(raised.message).startswith("PermissionError")
    raised = expect_raised(start(rt, 'from pathlib import Path\nPath("/data/sub/../../secret.txt").read_text()'))
    assert last_line(raised.message).startswith("PermissionError")
    assert expect_complete(start(rt, 'from pathlib import Path\nPath("/data/../secret.txt").exists()')).value is False


def test_dotdot_write_out_of_a_read_write_mount_is_refused(data_dir):
    raised = expect_raised(
        start(rw(data_dir), 'from pathlib import Path\nPath("/data/../escaped.txt").write_text("x")')
    )
    assert last_line(raised.message).startswith("PermissionError")
    assert not (data_dir.parent / "escaped.txt").exists()


def test_dotdot_inside_a_mount_is_fine(data_dir):
    script = 'from pathlib import Path\nPath("/data/sub/../note.txt").read_text()'
    assert expect_complete(start(ro(data_dir), script)).value == "hello from host"


@pytest.mark.parametrize("make", [ro, rw])
def test_symlink_inside_the_mount_pointing_outside_is_refused(data_dir, make):
    os.symlink(data_dir.parent / "secret.txt", data_dir / "link.txt")
    os.symlink(data_dir.parent, data_dir / "linkdir")
    rt = make(data_dir)
    for path in ["/data/link.txt", "/data/linkdir/secret.txt"]:
        raised = expect_raised(start(rt, f"from pathlib import Path\nPath({path!r}).read_text()"))
        assert last_line(raised.message).startswith("PermissionError"), raised.message
        assert "outside" not in raised.message


def test_symlink_escape_write_is_refused(data_dir):
    os.symlink(data_dir.parent, data_dir / "linkdir")
    raised = expect_raised(
        start(rw(data_dir), 'from pathlib import Path\nPath("/data/linkdir/evil.txt").write_text("x")')
    )
    assert last_line(raised.message).startswith("PermissionError")
    assert not (data_dir.parent / "evil.txt").exists()


def test_relative_symlink_staying_inside_the_mount_is_followed(data_dir):
    os.symlink("note.txt", data_dir / "inner.txt")
    assert expect_complete(
        start(ro(data_dir), 'from pathlib import Path\nPath("/data/inner.txt").read_text()')
    ).value == ("hello from host")


def test_absolute_symlink_is_refused_even_when_it_points_inside(data_dir):
    """monty-fs 1.4 resolves paths against the mount's directory descriptor: an absolute
    link target names a host path, which the sandbox never follows."""
    os.symlink(data_dir / "note.txt", data_dir / "inner.txt")
    raised = expect_raised(start(ro(data_dir), 'from pathlib import Path\nPath("/data/inner.txt").read_text()'))
    assert last_line(raised.message).startswith("PermissionError")


def test_paths_outside_every_mount_stay_refused_with_mounts(data_dir):
    rt = rw(data_dir)
    raised = expect_raised(start(rt, 'from pathlib import Path\nPath("/etc/passwd").read_text()'))
    assert last_line(raised.message).startswith("PermissionError")
    assert expect_complete(start(rt, 'from pathlib import Path\nPath("/etc/passwd").exists()')).value is False
    # A sibling whose name merely starts with the mount's name is outside it.
    assert expect_complete(start(rt, 'from pathlib import Path\nPath("/database").exists()')).value is False


def test_several_mounts_with_their_own_access(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    rt = MontyRuntime(
        mounts=[
            Mount(virtual_path="/in", host_path=a, access=PathAccess.READ_ONLY),
            Mount(virtual_path="/out/nested", host_path=b, access=PathAccess.READ_WRITE),
        ]
    )
    (a / "x.txt").write_text("in")
    script = 'from pathlib import Path\nPath("/out/nested/y.txt").write_text(Path("/in/x.txt").read_text() + "!")\n1'
    expect_complete(start(rt, script))
    assert (b / "y.txt").read_text() == "in!"
    expect_raised(start(rt, 'from pathlib import Path\nPath("/in/z.txt").write_text("x")'))
    assert not (a / "z.txt").exists()


@pytest.mark.parametrize("virtual", ["relative", "data", "", "/", "/a/", "/a/../b", "/a/./b", "//a", "/a//b", "/.."])
def test_invalid_virtual_paths_are_rejected_at_construction(tmp_path, virtual):
    with pytest.raises(ValueError):
        MontyRuntime(mounts=[Mount(virtual_path=virtual, host_path=tmp_path)])


def test_duplicate_virtual_paths_are_rejected(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(ValueError, match="twice"):
        MontyRuntime(mounts=[Mount(virtual_path="/a", host_path=tmp_path), Mount(virtual_path="/a", host_path=other)])


def test_missing_host_dir_is_rejected(tmp_path):
    with pytest.raises(ValueError):
        MontyRuntime(mounts=[Mount(virtual_path="/a", host_path=tmp_path / "missing")])


def test_host_path_that_is_a_file_is_rejected(tmp_path):
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(ValueError):
        MontyRuntime(mounts=[Mount(virtual_path="/a", host_path=tmp_path / "f.txt")])


def test_no_network_and_no_subprocess(monty):
    for module in ["socket", "subprocess", "urllib", "http"]:
        raised = expect_raised(start(monty, f"import {module}"))
        assert "ModuleNotFoundError" in last_line(raised.message)
    raised = expect_raised(start(monty, 'import os\nos.system("true")'))
    assert "AttributeError" in last_line(raised.message)


# ------------------------------------------------------------------ the prompt


def os_part(rt: MontyRuntime) -> str:
    return rt.capabilities().prompt


def test_prompt_lists_mounts_with_their_access(data_dir, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    rt = MontyRuntime(
        mounts=[
            Mount(virtual_path="/data", host_path=data_dir),
            Mount(virtual_path="/out", host_path=out, access=PathAccess.READ_WRITE),
        ],
        environ={"PROJECT": "acme-secret-value"},
    )
    prompt = os_part(rt)
    assert '"/data" (read-only)' in prompt
    assert '"/out" (read-write)' in prompt
    assert "expose 1 variable" in prompt
    assert "expose 1 variables" not in prompt
    assert "PROJECT" in prompt
    assert "acme-secret-value" not in prompt
    assert str(data_dir) not in prompt  # host paths are not the model's business
    assert "subset of `pathlib.Path`" in prompt
    assert "`read_text()`" in prompt
    assert "`iterdir()`" in prompt
    assert "read-write mounts only" in prompt


def test_prompt_names_env_variables_never_values():
    rt = MontyRuntime(environ={"API_TOKEN": "tok-123456", "REGION": "eu-west-9"})
    prompt = os_part(rt)
    assert "expose 2 variables" in prompt
    assert "API_TOKEN" in prompt and "REGION" in prompt
    assert "tok-123456" not in prompt and "eu-west-9" not in prompt


def test_prompt_omits_path_methods_when_no_paths_are_mounted():
    prompt = os_part(MontyRuntime(environ={"PROJECT": "acme"}))
    assert "no paths are accessible" in prompt
    assert "subset of `pathlib.Path`" not in prompt
    assert "`read_text()`" not in prompt


def test_sandboxed_prompt_states_no_access(monty):
    prompt = os_part(monty)
    assert "no filesystem access" in prompt
    assert "host clock" in prompt
    assert "os.environ is empty" in prompt
    assert "no network" in prompt and "no subprocess" in prompt
    assert "subset of `pathlib.Path`" not in prompt


def test_prompt_without_clock_does_not_promise_it():
    prompt = os_part(MontyRuntime(system_clock=False))
    assert "host clock" not in prompt
    assert "OSError" in prompt


def test_prompt_extra_is_appended():
    prompt = MontyRuntime(prompt_extra="Prefer metric units.").capabilities().prompt
    assert prompt.rstrip().endswith("Prefer metric units.")


def test_prompt_states_the_call_tool_contract(monty):
    prompt = monty.capabilities().prompt
    assert 'call_tool("tool_name", {"arg": value})' in prompt
    assert "LAST EXPRESSION" in prompt
    assert "await" in prompt


# ------------------------------------------------------------------ render_tools

SEARCH = Tool(
    "search",
    "Search the web\n   for a   query.",
    {
        "type": "object",
        "properties": {"limit": {"type": "integer"}, "query": {"type": "string"}},
        "required": ["query"],
    },
)
FETCH_CART = Tool(
    "fetch-cart",
    "Fetch a cart.",
    {"type": "object", "properties": {"user_id": {"type": "string"}}, "required": ["user_id"]},
)
PING = Tool("ping", "Ping.")
CLASSIFY = Tool(
    "classify", "Classify.", {"type": "object", "properties": {"class": {"type": "string"}}, "required": ["class"]}
)


def test_every_tool_is_rendered_as_a_call_tool_args_dict_with_collapsed_description(monty):
    text = monty.render_tools([SEARCH])
    assert "# Search the web for a query." in text
    assert 'call_tool("search", {"query": <str>, "limit": <int, optional>})' in text


def test_a_non_identifier_name_uses_the_same_call_tool_form(monty):
    assert 'call_tool("fetch-cart", {"user_id": <str>})' in monty.render_tools([FETCH_CART])


def test_a_zero_parameter_tool_takes_no_args_dict(monty):
    alone = monty.render_tools([PING])
    assert alone.rstrip().endswith('call_tool("ping")')
    assert "{" not in alone
    assert 'call_tool("ping")\n' in monty.render_tools([PING, SEARCH])


def test_a_keyword_named_parameter_is_just_a_dict_key(monty):
    assert 'call_tool("classify", {"class": <str>})' in monty.render_tools([CLASSIFY])


def test_rendering_never_uses_def_and_is_empty_for_no_tools(monty):
    text = monty.render_tools([SEARCH, FETCH_CART, PING, CLASSIFY])
    assert "def " not in text
    assert monty.render_tools([]) == ""


@pytest.mark.parametrize(
    "prop, placeholder",
    [
        ({"type": "string"}, "<str>"),
        ({"type": "integer"}, "<int>"),
        ({"type": "number"}, "<float>"),
        ({"type": "boolean"}, "<bool>"),
        ({"type": "array"}, "<list>"),
        ({"type": "object"}, "<dict>"),
        ({"type": ["string", "null"]}, "<str | None>"),
        ({}, "<Any>"),
    ],
)
def test_placeholders_follow_the_json_schema_type(monty, prop, placeholder):
    tool = Tool("t", "T.", {"type": "object", "properties": {"p": prop}, "required": ["p"]})
    assert f'call_tool("t", {{"p": {placeholder}}})' in monty.render_tools([tool])


def test_rendered_call_is_what_the_runtime_accepts(monty):
    """The rendered form, with placeholders filled, is a valid call."""
    line = next(ln for ln in monty.render_tools([FETCH_CART]).splitlines() if ln.startswith("call_tool("))
    script = line.replace("<str>", '"u-1"')
    step = start(monty, script)
    assert step.call.name == "fetch-cart"
    assert step.call.keyword_args == {"user_id": "u-1"}


def test_long_running_tools_are_marked(monty):
    text = monty.render_tools([Tool("slow", "Slow job.", is_long_running=True)])
    assert "long-running" in text


def test_render_tools_is_pure(monty):
    tools = [SEARCH, PING]
    assert monty.render_tools(tools) == monty.render_tools(tools) == MontyRuntime().render_tools(tools)


# ------------------------------------------------------------------ the prompt does not lie

PATH_PROBES = {
    "exists()": 'Path("/w/a.txt").exists() is True and Path("/w/zz").exists() is False',
    "is_file()": 'Path("/w/a.txt").is_file() and not Path("/w").is_file()',
    "is_dir()": 'Path("/w").is_dir() and not Path("/w/a.txt").is_dir()',
    "is_symlink()": 'Path("/w/a.txt").is_symlink() is False',
    "read_text()": 'Path("/w/a.txt").read_text() == "abc"',
    "read_bytes()": 'Path("/w/a.txt").read_bytes() == b"abc"',
    "stat()": 'Path("/w/a.txt").stat().st_size == 3',
    "iterdir()": '[p.name for p in Path("/w").iterdir()] == ["a.txt"]',
    "resolve()": 'str(Path("/w/x/../a.txt").resolve()) == "/w/a.txt"',
    "absolute()": 'str(Path("/w/a.txt").absolute()) == "/w/a.txt"',
    'open("r")': 'f = Path("/w/a.txt").open("r")\nf.read() == "abc"',
    "write_text(s)": 'Path("/w/b.txt").write_text("hi")\nPath("/w/b.txt").read_text() == "hi"',
    "write_bytes(b)": 'Path("/w/c.bin").write_bytes(b"\\x00\\x01")\nPath("/w/c.bin").read_bytes() == b"\\x00\\x01"',
    "append_text(s)": 'Path("/w/a.txt").append_text("d")\nPath("/w/a.txt").read_text() == "abcd"',
    "append_bytes(b)": 'Path("/w/a.txt").append_bytes(b"d")\nPath("/w/a.txt").read_bytes() == b"abcd"',
    "mkdir(parents=False, exist_ok=False)": (
        'Path("/w/sub").mkdir()\nPath("/w/p/q").mkdir(parents=True, exist_ok=True)\n'
        'Path("/w/sub").is_dir() and Path("/w/p/q").is_dir()'
    ),
    "unlink()": 'Path("/w/a.txt").unlink()\nnot Path("/w/a.txt").exists()',
    "rmdir()": 'Path("/w/g").mkdir()\nPath("/w/g").rmdir()\nnot Path("/w/g").exists()',
    "rename(target)": (
        'Path("/w/a.txt").rename(Path("/w/i.txt"))\n'
        'Path("/w/i.txt").read_text() == "abc" and not Path("/w/a.txt").exists()'
    ),
    'open("w")': 'f = Path("/w/j.txt").open("w")\nf.write("zz")\nf.close()\nPath("/w/j.txt").read_text() == "zz"',
    'open("a")': 'f = Path("/w/a.txt").open("a")\nf.write("d")\nf.close()\nPath("/w/a.txt").read_text() == "abcd"',
    "the / operator": 'str(Path("/w") / "a.txt") == "/w/a.txt" and (Path("/w") / "a.txt").read_text() == "abc"',
    "joinpath(...)": 'str(Path("/w").joinpath("x", "y")) == "/w/x/y"',
    "is_absolute()": 'Path("/w").is_absolute() and not Path("w").is_absolute()',
    "with_name()": 'str(Path("/w/a.txt").with_name("b.md")) == "/w/b.md"',
    "with_stem()": 'str(Path("/w/a.txt").with_stem("b")) == "/w/b.txt"',
    "with_suffix()": 'str(Path("/w/a.txt").with_suffix(".md")) == "/w/a.md"',
    "as_posix()": 'Path("/w/a.txt").as_posix() == "/w/a.txt"',
    ".name": 'Path("/w/a.tar.gz").name == "a.tar.gz"',
    ".parent": 'str(Path("/w/a.txt").parent) == "/w"',
    ".stem": 'Path("/w/a.txt").stem == "a"',
    ".suffix": 'Path("/w/a.txt").suffix == ".txt"',
    ".suffixes": 'Path("/w/a.tar.gz").suffixes == [".tar", ".gz"]',
    ".parts": 'Path("/w/a.txt").parts == ("/", "w", "a.txt")',
}


def listed_path_methods(prompt: str) -> set[str]:
    start_at = prompt.index("subset of `pathlib.Path`")
    block = []
    for line in prompt[start_at:].splitlines()[1:]:
        if not line.startswith("  - "):
            break
        block.append(line.split(":", 1)[1])
    return set(re.findall(r"`([^`]+)`", "\n".join(block)))


def test_every_listed_path_method_has_a_probe(tmp_path):
    rt = MontyRuntime(mounts=[Mount(virtual_path="/w", host_path=tmp_path, access=PathAccess.READ_WRITE)])
    assert listed_path_methods(rt.capabilities().prompt) == set(PATH_PROBES)


@pytest.mark.parametrize("method", sorted(PATH_PROBES))
def test_every_listed_path_method_works_on_a_read_write_mount(tmp_path, method):
    (tmp_path / "a.txt").write_text("abc")
    rt = MontyRuntime(mounts=[Mount(virtual_path="/w", host_path=tmp_path, access=PathAccess.READ_WRITE)])
    done = expect_complete(start(rt, "from pathlib import Path\n" + PATH_PROBES[method]))
    assert done.value is True


def test_glob_lists_the_mount_and_an_unlisted_path_method_raises_attribute_error(tmp_path):
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.csv").write_text("b")
    rt = MontyRuntime(mounts=[Mount(virtual_path="/w", host_path=tmp_path, access=PathAccess.READ_WRITE)])
    found = expect_complete(start(rt, 'from pathlib import Path\nsorted(str(p) for p in Path("/w").glob("*.txt"))'))
    assert found.value == ["/w/a.txt"]
    raised = expect_raised(start(rt, 'from pathlib import Path\nPath("/w").chmod(0o777)'))
    assert last_line(raised.message).startswith("AttributeError")
