"""The runtime seam: step and outcome types, capabilities, tool catalog, argument binding,
and the package's public surface (SPEC §2)."""

from __future__ import annotations

import dataclasses
import types

import pytest

import codeact
from codeact import (
    Call,
    CodeActError,
    CodeRuntime,
    CodeRuntimeError,
    Complete,
    CPythonRuntime,
    MontyRuntime,
    PendingCall,
    Raised,
    ResumeError,
    ResumeValue,
    RuntimeCapabilities,
    SnapshotError,
    Tool,
    ValueConversionError,
    bind_call_args,
    default_tool_catalog,
)
from codeact.runtime import Gather
from codeact.testing import PlannedCall, PlannedComplete, ScriptedRuntime

# ------------------------------------------------------------------ types


def test_runtime_capabilities_default_to_no_suspension_and_empty_prompt():
    caps = RuntimeCapabilities()
    assert caps.supports_suspension is False
    assert caps.prompt == ""


def test_runtime_capabilities_carry_prompt_and_flag_and_are_frozen():
    caps = RuntimeCapabilities(supports_suspension=True, prompt="scripted test runtime")
    assert caps.supports_suspension is True
    assert caps.prompt == "scripted test runtime"
    with pytest.raises(dataclasses.FrozenInstanceError):
        caps.prompt = "other"  # type: ignore[misc]


@pytest.mark.parametrize("cls, payload", [(Complete, 1), (Raised, "boom")])
def test_steps_default_to_empty_stdout_and_carry_it_when_given(cls, payload):
    assert cls(payload).stdout == ""
    step = cls(payload, stdout="hi")
    assert step.stdout == "hi"
    assert step == cls(payload, "hi")


def test_complete_value_and_raised_message_fields():
    assert Complete(value={"a": [1]}).value == {"a": [1]}
    assert Raised(message="Traceback ...").message == "Traceback ..."


def test_call_carries_its_pending_call_and_stdout(monty):
    step = monty.start('print("x")\ncall_tool("t")', "agent")
    assert isinstance(step, Call)
    assert isinstance(step.call, PendingCall)
    assert step.stdout == "x\n"


def test_resume_outcomes():
    assert ResumeValue(3).value == 3
    err = ResumeError("boom")
    assert err.message == "boom"
    assert err.exc_type == "RuntimeError"
    assert ResumeError("boom", "ValueError").exc_type == "ValueError"
    with pytest.raises(dataclasses.FrozenInstanceError):
        err.message = "x"  # type: ignore[misc]


def test_outcomes_behave_as_frozen_dataclasses():
    # Native classes (rust/src/seam.rs) with the semantics the dataclasses had.
    value = ResumeValue(value=[1, {"a": 2}])
    assert value == ResumeValue([1, {"a": 2}]) and value != ResumeValue([1])
    assert ResumeValue(1) != ResumeError("1") and ResumeError("m") != ResumeValue("m")
    assert ResumeError(message="m", exc_type="KeyError") == ResumeError("m", "KeyError")
    assert ResumeError("m") != ResumeError("m", "KeyError")
    nan = float("nan")
    assert ResumeValue(nan) == ResumeValue(nan)  # fields compare as tuples do: identity first
    assert repr(value) == "ResumeValue(value=[1, {'a': 2}])"
    assert repr(ResumeError("boom")) == "ResumeError(message='boom', exc_type='RuntimeError')"
    assert hash(ResumeValue(3)) == hash((3,)) and hash(ResumeError("m")) == hash(("m", "RuntimeError"))
    with pytest.raises(TypeError, match="unhashable"):
        hash(value)
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.value = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del value.value  # type: ignore[misc]
    with pytest.raises(TypeError):
        ResumeValue()  # type: ignore[call-arg]
    match ResumeError("m", "KeyError"):
        case ResumeError(message, exc_type):
            assert (message, exc_type) == ("m", "KeyError")
    match ResumeValue(7):
        case ResumeValue(v):
            assert v == 7
    import copy
    import pickle

    for outcome in (value, ResumeError("m", "KeyError")):
        assert pickle.loads(pickle.dumps(outcome)) == outcome
        assert copy.deepcopy(outcome) == outcome and copy.copy(outcome) == outcome
    assert ResumeValue.__module__ == "codeact.runtime" and codeact.runtime.ResumeValue is ResumeValue


def test_subclassed_outcomes_resume_a_script(monty):
    class Answer(ResumeValue):
        pass

    step = monty.start('call_tool("t", {"x": 1}) + 1', "agent")
    assert isinstance(step, Call)
    done = step.call.resume(Answer(41))
    assert isinstance(done, Complete) and done.value == 42
    assert Answer(1) != ResumeValue(1)


def test_steps_built_by_the_engine_are_the_seam_dataclasses(monty):
    step = monty.start('print("a")\n1 + 1', "agent")
    assert type(step) is Complete and step == Complete(2, "a\n", step.os_log)
    assert dataclasses.replace(step, stdout="") == Complete(2, "", step.os_log)
    assert repr(step).startswith("Complete(value=2, stdout='a\\n', os_log=(")
    raised = monty.start("1 / 0", "agent")
    assert type(raised) is Raised and "ZeroDivisionError" in raised.message and raised.stdout == ""
    call = monty.start('call_tool("t", {"x": [1, 2]})', "agent")
    assert type(call) is Call and call.stdout == "" and call.call.keyword_args == {"x": [1, 2]}
    assert dataclasses.asdict(raised)["message"] == raised.message


def _scripted() -> ScriptedRuntime:
    return ScriptedRuntime([[PlannedCall("t", {"x": [1, 2]}), PlannedComplete(None)]])


RUNTIMES = {
    "monty": MontyRuntime,
    "monty in a process": lambda: MontyRuntime(isolation="process"),
    "cpython": CPythonRuntime,
    "scripted": _scripted,
}


@pytest.mark.parametrize("make", RUNTIMES.values(), ids=list(RUNTIMES))
def test_runtimes_satisfy_the_protocol(make):
    """Every shipped runtime has what the agent's driver calls (issue 47: nothing found by
    name): ``tool_style``, ``seal``, and calls that resume within a wait."""
    runtime = make()
    assert isinstance(runtime, CodeRuntime)
    assert runtime.tool_style in ("call_tool", "functions") and runtime.seal(b"") is None
    step = runtime.start('call_tool("t", {"x": [1, 2]})\n1', "agent")
    assert type(step) is Call and isinstance(step.call, PendingCall)
    got = step.call.resume_within(ResumeValue(3), 30.0, None)
    assert isinstance(got, (Complete, Raised)) or got.wait(30.0)  # the step, or its ticket once done


def test_a_keyed_runtime_seals_and_an_unkeyed_one_does_not():
    assert MontyRuntime(snapshot_key=b"k" * 32).seal(b"data") is not None
    assert MontyRuntime().seal(b"data") is None


@pytest.mark.parametrize("isolation", ["in_process", "process"])
def test_a_gather_resumes_within_a_wait_and_as_a_ticket(isolation):
    script = 'import asyncio\na, b = await asyncio.gather(call_tool("t", {"x": 1}), call_tool("t", {"x": 2}))\na + b'
    runtime = MontyRuntime(isolation=isolation)
    gather = runtime.start(script, "agent")
    assert type(gather) is Gather
    outcomes = {c.call_id: ResumeValue(c.keyword_args["x"] * 10) for c in gather.calls}
    got = gather.resume_within(outcomes, 30.0)
    step = got if type(got) is Complete else (got.wait(30.0), got.result())[1]
    assert step.value == 30
    again = runtime.start(script, "agent")
    ticket = again.resume_async({c.call_id: ResumeValue(1) for c in again.calls})
    assert ticket.wait(30.0) and ticket.result().value == 2


def test_monty_claims_suspension_and_cpython_does_not():
    assert MontyRuntime().capabilities().supports_suspension is True
    assert CPythonRuntime().capabilities().supports_suspension is False


def test_exception_tree():
    assert issubclass(CodeRuntimeError, CodeActError)
    assert issubclass(SnapshotError, CodeRuntimeError)
    assert issubclass(ValueConversionError, CodeRuntimeError)
    # Never the builtin RuntimeError: a script's RuntimeError must not look like a host failure.
    assert not issubclass(CodeRuntimeError, RuntimeError)


# ------------------------------------------------------------------ default_tool_catalog


class BuiltinTool(Tool):
    is_builtin = True


def test_catalog_is_empty_without_tools():
    assert default_tool_catalog([]) == ""


def test_catalog_omits_builtin_tools():
    assert default_tool_catalog([BuiltinTool("web_search", "Search the web.")]) == ""
    text = default_tool_catalog([BuiltinTool("web_search", "Search."), Tool("add", "Add numbers.")])
    assert "web_search" not in text
    assert "add" in text


def test_catalog_lists_name_and_description():
    text = default_tool_catalog([Tool("add", "Adds two\n   numbers."), Tool("echo", "Echoes.")])
    assert text.startswith("Available tools:")
    assert "add" in text and "Adds two numbers." in text
    assert "echo" in text and "Echoes." in text


def test_catalog_annotates_long_running_tools_only():
    text = default_tool_catalog([Tool("slow", "Slow.", is_long_running=True), Tool("fast", "Fast.")])
    (slow_line,) = [line for line in text.splitlines() if "slow" in line]
    (fast_line,) = [line for line in text.splitlines() if "fast" in line]
    assert "[long-running]" in slow_line
    assert "[long-running]" not in fast_line


def test_catalog_shows_parameters():
    schema = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
    assert '"query"' in default_tool_catalog([Tool("search", "Search.", schema)])


# ------------------------------------------------------------------ bind_call_args


def schema(required=(), properties=(), additional=None):
    s = {"type": "object", "properties": {p: {} for p in properties}, "required": list(required)}
    if additional is not None:
        s["additionalProperties"] = additional
    return s


def test_bind_positionals_to_required_names_in_order():
    tool = Tool("t", parameters=schema(required=["a", "b"], properties=["b", "a"]))
    assert bind_call_args(tool, [1, 2], {}) == {"a": 1, "b": 2}


def test_bind_positionals_to_required_then_other_properties():
    tool = Tool("t", parameters=schema(required=["b"], properties=["a", "b", "c"]))
    assert bind_call_args(tool, [1, 2, 3], {}) == {"b": 1, "a": 2, "c": 3}


def test_bind_schemaless_tool_uses_arg_i_and_keeps_keywords():
    assert bind_call_args(Tool("echo"), [1], {"label": "x"}) == {"arg0": 1, "label": "x"}
    assert bind_call_args(Tool("echo"), [1, 2], {}) == {"arg0": 1, "arg1": 2}


def test_bind_keywords_only_is_exact_and_always_a_dict():
    tool = Tool("t", parameters=schema(required=["a"], properties=["a"]))
    assert bind_call_args(tool, [], {"a": 1}) == {"a": 1}
    assert bind_call_args(tool, (), {}) == {}


def test_bind_mixes_positionals_and_keywords():
    tool = Tool("t", parameters=schema(required=["a", "b"], properties=["a", "b"]))
    assert bind_call_args(tool, [1], {"b": 2}) == {"a": 1, "b": 2}


def test_bind_refuses_too_many_positionals():
    tool = Tool("t", parameters=schema(required=["a"], properties=["a"]))
    with pytest.raises(TypeError, match="positional"):
        bind_call_args(tool, [1, 2], {})


def test_bind_refuses_a_parameter_given_twice():
    tool = Tool("t", parameters=schema(required=["a", "b"], properties=["a", "b"]))
    with pytest.raises(TypeError, match="'a'"):
        bind_call_args(tool, [1], {"a": 2})


def test_bind_refuses_unknown_names_when_schema_forbids_extras():
    tool = Tool("t", parameters=schema(required=["a"], properties=["a"], additional=False))
    with pytest.raises(TypeError, match="'zzz'"):
        bind_call_args(tool, [], {"a": 1, "zzz": 2})


def test_bind_accepts_unknown_names_when_schema_allows_extras():
    tool = Tool("t", parameters=schema(required=["a"], properties=["a"]))
    assert bind_call_args(tool, [], {"a": 1, "zzz": 2}) == {"a": 1, "zzz": 2}


# ------------------------------------------------------------------ the package surface


def test_all_is_a_tuple_without_duplicates_and_every_name_resolves():
    assert isinstance(codeact.__all__, tuple)
    assert len(set(codeact.__all__)) == len(codeact.__all__)
    for name in codeact.__all__:
        assert getattr(codeact, name) is not None, name


def test_package_exports_exactly_all():
    public = {
        n for n in dir(codeact) if not n.startswith("_") and not isinstance(getattr(codeact, n), types.ModuleType)
    }
    assert public == set(codeact.__all__)


def test_star_import_gives_all():
    ns: dict[str, object] = {}
    exec("from codeact import *", ns)
    assert {n for n in ns if n != "__builtins__"} == set(codeact.__all__)


def test_tool_requires_a_name():
    with pytest.raises(ValueError):
        Tool("")
    t = Tool("fetch-cart", "d", {"type": "object"}, is_long_running=True)
    assert (t.name, t.description, t.parameters, t.is_long_running) == ("fetch-cart", "d", {"type": "object"}, True)
