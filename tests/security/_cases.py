"""The adversarial scripts, by family, with the exact outcome each must have.

An expectation is one of:
- ``("complete", value)``: the script finishes with exactly ``value``;
- ``("raised", prefix)``: a ``Raised`` step whose last line starts with ``prefix``;
- ``("raised_re", pattern)``: a ``Raised`` step whose last line matches ``pattern``;
- ``("complete_in", allowed)``: the script finishes with a list whose items are all in ``allowed``;
- ``("host_error", ExceptionName, fragment)``: the host call raises that codeact exception
  (a host failure), its message containing ``fragment``.

Scripts run with ``LIMITS`` (0.5 s, 64 MiB, 200 frames) unless a case says otherwise. The
filesystem family mounts ``/data`` (read-only) and ``/out`` (read-write) over folders the
runner builds; ``{OUTSIDE}`` in a script is replaced with the host path of a folder outside
every mount holding ``secret.txt``.

A tool call is answered by the runner: ``echo`` returns its arguments, any other tool
returns ``None``. Cases of the protocol family may name a host-side ``driver`` instead
(see ``_runner.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SECRET = "s3cr3t-do-not-leak"
HOST_ENV_SECRET = "CODEACT_TEST_HOST_SECRET"


@dataclass(frozen=True)
class Case:
    name: str
    script: str
    expect: tuple[Any, ...]
    limits: dict[str, Any] = field(default_factory=dict)
    driver: str | None = None
    forbid: tuple[str, ...] = (SECRET,)
    """Texts that must appear nowhere in the outcome (value, message, stdout)."""
    max_stdout: int | None = None
    """Most characters of stdout the step may carry."""
    bug: str | None = None
    """A known bug in code this suite does not own: the case is a strict xfail with this reason."""


PE = ("raised", "PermissionError")

FILESYSTEM = [
    Case("absolute-host-path", "from pathlib import Path\nPath('/etc/passwd').read_text()", PE),
    Case("dotdot-out-of-mount", "from pathlib import Path\nPath('/data/../etc/passwd').read_text()", PE),
    Case(
        "dotdot-to-outside-folder", "from pathlib import Path\nPath('/data/../../{OUTSIDE}/secret.txt').read_text()", PE
    ),
    Case("host-path-of-outside-folder", "from pathlib import Path\nPath('{OUTSIDE}/secret.txt').read_text()", PE),
    Case("deep-dotdot", "from pathlib import Path\nPath('/data/' + '../' * 50 + 'etc/passwd').read_text()", PE),
    Case("dotdot-between-mounts-write", "from pathlib import Path\nPath('/out/../data/new.txt').write_text('x')", PE),
    Case("symlink-dir-escape", "from pathlib import Path\nPath('/data/link_out/secret.txt').read_text()", PE),
    Case("symlink-file-escape", "from pathlib import Path\nPath('/data/link_secret').read_text()", PE),
    Case("symlink-bytes-escape", "from pathlib import Path\nPath('/data/link_secret').read_bytes()", PE),
    Case(
        "symlink-exists-is-false", "from pathlib import Path\nPath('/data/link_secret').exists()", ("complete", False)
    ),
    Case("symlink-stat", "from pathlib import Path\nPath('/data/link_secret').stat()", PE),
    Case("symlink-iterdir-escape", "from pathlib import Path\n[p.name for p in Path('/data/link_out').iterdir()]", PE),
    Case(
        "symlink-resolve-hides-host-path",
        "from pathlib import Path\nstr(Path('/data/link_out').resolve())",
        ("complete", "/data/link_out"),
        forbid=(SECRET, "{OUTSIDE}"),
    ),
    Case(
        "write-through-escaping-symlink", "from pathlib import Path\nPath('/out/link_out/pwn.txt').write_text('x')", PE
    ),
    Case("write-read-only-mount", "from pathlib import Path\nPath('/data/new.txt').write_text('x')", PE),
    Case("unlink-read-only-mount", "from pathlib import Path\nPath('/data/inside.txt').unlink()", PE),
    Case("mkdir-read-only-mount", "from pathlib import Path\nPath('/data/sub').mkdir()", PE),
    Case("mkdir-outside", "from pathlib import Path\nPath('/tmp/codeact-pwn').mkdir()", PE),
    Case(
        "rename-out-of-mount",
        "from pathlib import Path\nPath('/out/f.txt').write_text('x')\nPath('/out/f.txt').rename('/tmp/f.txt')",
        # monty-fs 1.4 refuses a rename whose target is outside the source's mount as a cross-device move.
        ("raised", "OSError: [Errno 18] Invalid cross-device link"),
    ),
    Case(
        "rename-into-read-only",
        "from pathlib import Path\nPath('/out/g.txt').write_text('x')\nPath('/out/g.txt').rename('/data/g.txt')",
        ("raised", "OSError: [Errno 18] Invalid cross-device link"),
    ),
    Case("iterdir-root", "from pathlib import Path\n[str(p) for p in Path('/').iterdir()]", PE),
    Case(
        "exists-outside-is-false",
        "from pathlib import Path\n[Path('/etc/passwd').exists(), Path('/etc').is_dir()]",
        ("complete", [False, False]),
    ),
    Case("relative-path", "from pathlib import Path\nPath('etc/passwd').read_text()", PE),
    Case(
        "nul-in-path",
        "from pathlib import Path\nPath('/data/inside.txt\\x00/../../etc/passwd').read_text()",
        ("raised", "ValueError: embedded null byte"),  # CPython's own refusal, before any path lookup
    ),
    Case(
        "very-long-name",
        "from pathlib import Path\nPath('/out/' + 'a' * 5000).write_text('x')",
        ("raised_re", r"^OSError: \[Errno 36\] File name too long"),
    ),
    Case(
        "very-deep-path",
        "from pathlib import Path\nPath('/out/' + 'd/' * 3000 + 'f').read_text()",
        ("raised_re", r"^(OSError: \[Errno 36\] File name too long|FileNotFoundError)"),
    ),
    Case("case-variant-of-mount", "from pathlib import Path\nPath('/DATA/inside.txt').read_text()", PE),
    Case(
        "double-slash-prefix", "from pathlib import Path\nPath('//data/inside.txt').read_text()", ("complete", "inside")
    ),
    Case("inside-read-works", "from pathlib import Path\nPath('/data/inside.txt').read_text()", ("complete", "inside")),
    Case("builtin-open", "open('/etc/passwd').read()", PE),
    Case("builtin-open-through-symlink", "open('/data/link_secret').read()", PE),
    Case(
        "hardlink-placed-by-host-is-a-file",
        "from pathlib import Path\nPath('/data/hardlink').read_text()",
        ("complete", "hardlinked"),
    ),
    Case(
        "race-symlink-swap",
        "",
        ("complete_in", ["denied", "missing", "public"]),
        limits={"max_duration": 10.0},
        # 0.1.0 (monty-fs 0.0.19) followed a symlink swapped in between the mount check and the open;
        # monty-fs 1.4 resolves through the mount's directory descriptor and never leaves it.
        driver="race_symlink_swap",
    ),
    Case(
        "rmdir-mount-root",
        "from pathlib import Path\nPath('/out').rmdir()",
        ("raised", "PermissionError"),
    ),
    Case(
        "symlink-to-is-refused",
        "from pathlib import Path\nPath('/out/l').symlink_to('/etc/passwd')",
        ("raised", "AttributeError"),
    ),
    Case("os-listdir-root-refused", "import os\nos.listdir('/')", ("raised", "PermissionError")),
]
"""``race-symlink-swap`` (a host thread swapping a file for an escaping symlink while the
script reads it) is in ``test_adversarial.py``: it needs a live host thread."""

ENVIRONMENT = [
    Case("getenv-host-secret", f"import os\nos.getenv('{HOST_ENV_SECRET}')", ("complete", None)),
    Case("environ-is-the-map", "import os\ndict(os.environ)", ("complete", {"VISIBLE": "yes"})),
    Case("environ-subscript-host-var", f"import os\nos.environ['{HOST_ENV_SECRET}']", ("raised", "KeyError")),
    Case(
        "home-and-path-absent",
        "import os\n[os.getenv('HOME'), os.getenv('PATH'), 'HOME' in os.environ]",
        ("complete", [None, None, False]),
    ),
    Case("getenv-default", f"import os\nos.getenv('{HOST_ENV_SECRET}', 'dflt')", ("complete", "dflt")),
    Case("environ-keys", "import os\nlist(os.environ.keys())", ("complete", ["VISIBLE"])),
    Case("sys-argv", "import sys\nsys.argv", ("complete", ["agent"])),  # the script's name only
    Case("sys-path", "import sys\nsys.path", ("raised", "AttributeError")),
    Case("sys-modules", "import sys\nsys.modules", ("raised", "AttributeError")),
    Case("sys-executable", "import sys\nsys.executable", ("complete", "")),  # no host path
    Case("os-system", "import os\nos.system('echo pwned')", ("raised", "AttributeError")),
    Case("os-popen", "import os\nos.popen('id')", ("raised", "AttributeError")),
    Case("os-putenv", f"import os\nos.putenv('{HOST_ENV_SECRET}', 'x')", ("raised", "AttributeError")),
    Case("environ-write-stays-inside", "import os\nos.environ['NEW'] = 'v'\nos.getenv('NEW')", ("complete", None)),
    Case("import-subprocess", "import subprocess", ("raised", "ModuleNotFoundError")),
    Case("import-socket", "import socket", ("raised", "ModuleNotFoundError")),
    Case("import-ctypes", "import ctypes", ("raised", "ModuleNotFoundError")),
    Case("import-importlib", "import importlib", ("raised", "ModuleNotFoundError")),
    Case("import-builtins", "import builtins", ("raised", "ModuleNotFoundError")),
    Case("import-posix", "import posix", ("raised", "ModuleNotFoundError")),
    Case(
        "traceback-has-no-host-paths",
        "def f():\n    1/0\nf()",
        ("raised", "ZeroDivisionError"),
        forbid=(SECRET, "/work", "/home", ".rs"),
    ),
]

INTERPRETER = [
    Case("dunder-import", "__import__('os')", ("raised", "NameError")),
    Case("dunder-builtins", "__builtins__", ("raised", "NameError")),
    Case("class-mro", "().__class__.__mro__", ("raised", "AttributeError")),
    Case("subclasses", "''.__class__.__subclasses__()", ("raised", "AttributeError")),
    Case("object-subclasses", "object.__subclasses__()", ("raised", "AttributeError")),
    Case(
        "type-call-3-args",
        "type('X', (), {})",
        ("raised", "TypeError: the script's last expression must be plain data"),
    ),
    Case("type-of-type", "type(type(1))", ("raised", "TypeError: the script's last expression must be plain data")),
    Case("getattr-dunder-class", "getattr(1, '__class__')", ("raised", "AttributeError")),
    Case("getattr-dunder-globals", "def f():\n    pass\ngetattr(f, '__globals__')", ("raised", "AttributeError")),
    Case("function-code", "def f():\n    pass\nf.__code__", ("raised", "AttributeError")),
    # Monty 1.4 compiles eval/exec code inside the sandbox: same interpreter, same limits.
    Case("eval", "eval('1+1')", ("complete", 2)),
    Case("exec", "exec('x = 1')", ("complete", None)),
    Case("eval-escapes-nothing", 'eval(\'__import__("os").system("id")\')', ("raised", "NameError")),
    Case("compile", "compile('1', 'f', 'eval')", ("raised", "NameError")),
    Case("globals", "globals()", ("raised", "NameError")),
    Case("locals-vars", "vars()", ("raised", "NameError")),
    Case("open-builtin", "open", ("raised", "TypeError: the script's last expression must be plain data")),
    Case("breakpoint", "breakpoint()", ("raised", "NameError")),
    Case("input", "input()", ("raised", "NameError")),
    Case(
        "exception-traceback-frame",
        "try:\n    1/0\nexcept Exception as e:\n    e.__traceback__.tb_frame",
        ("raised", "AttributeError"),
    ),
    Case("sys-getframe", "import sys\nsys._getframe()", ("raised", "AttributeError")),
    Case("print-self", "print.__self__", ("raised", "AttributeError")),
    Case("str-dict", "str.__dict__", ("raised", "AttributeError")),
    Case("setattr-on-builtin-type", "setattr(int, 'x', 1)", ("raised", "AttributeError")),
    Case("class-inheritance-refused", "class A(Exception):\n    pass", ("raised", "NotImplementedError")),
    Case("decorator", "def d(f):\n    return f\n@d\ndef g():\n    return 3\ng()", ("complete", 3)),
    Case("generator-refused", "def g():\n    yield 1", ("raised", "NotImplementedError")),
    Case("json-object-hook-absent", "import json\njson.loads('{}', object_hook=print)", ("raised", "TypeError")),
    Case("re-catastrophic-backtracking", "import re\nre.match('(a+)+$', 'a' * 40 + '!')", ("complete", None)),
]

RESOURCES = [
    # The memory limit must be what stops these two, so the time limit is far away: under a loaded
    # machine the 0.5 s default tripped first (CI: "turn time limit exceeded: 530 ms").
    Case(
        "list-memory",
        "x = []\nwhile True:\n    x.append('a' * 1000)",
        ("raised", "MemoryError"),
        limits={"max_duration": 20.0},
    ),
    Case(
        "dict-memory",
        "d = {}\ni = 0\nwhile True:\n    d[i] = 'v' * 100\n    i += 1",
        ("raised", "MemoryError"),
        limits={"max_duration": 20.0},
    ),
    Case(
        "set-memory",
        "s = set()\ni = 0\nwhile True:\n    s.add(i * 1000003)\n    i += 1",
        ("raised_re", r"^(MemoryError|TimeoutError)"),
    ),
    Case("tuple-memory", "t = ()\nwhile True:\n    t = t + (1,) * 1000", ("raised_re", r"^(MemoryError|TimeoutError)")),
    Case("str-memory", "'x' * 10**9", ("raised", "MemoryError")),
    Case("bytes-memory", "b'x' * 10**9", ("raised", "MemoryError")),
    Case("list-repeat", "[None] * 10**9", ("raised", "MemoryError")),
    Case("nested-list-repeat", "[[0] * 10**4] * 10**5\n[[0] * 10**4 for _ in range(10**4)]", ("raised", "MemoryError")),
    Case("range-list", "list(range(10**10))", ("raised", "MemoryError")),
    Case("dict-comprehension", "{i: i for i in range(10**8)}", ("raised_re", r"^(MemoryError|TimeoutError)")),
    Case("str-join", "'-'.join(['abcdefgh'] * 10**8)", ("raised", "MemoryError")),
    Case("huge-int-power", "10 ** 10 ** 10", ("raised", "MemoryError")),
    Case("huge-int-shift", "1 << 10**11", ("raised", "MemoryError")),
    Case("huge-int-to-str", "len(str(10 ** 300000))", ("raised", "ValueError: Exceeds the limit (4300 digits)")),
    # One multiplication of two ~16 MiB integers is not interruptible and Monty checks its
    # size, not its time: it overruns max_duration by seconds (docs/security.md, "Known bugs").
    Case(
        "huge-int-multiply-loop",
        "x = 3\nwhile True:\n    x = x * x",
        ("raised_re_or_worker_killed", r"^(MemoryError|TimeoutError)"),
    ),
    Case("str-doubling", "s = 'ab'\nwhile True:\n    s = s + s", ("raised", "MemoryError")),
    Case(
        "catch-memory-error-and-retry",
        "n = 0\nwhile True:\n    try:\n        x = 'x' * 10**9\n    except MemoryError:\n        n += 1",
        ("raised", "MemoryError"),
    ),
    Case(
        "catch-timeout-and-continue",
        "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass",
        ("raised", "TimeoutError"),
    ),
    Case(
        "catch-recursion-and-continue",
        "def f():\n    f()\nwhile True:\n    try:\n        f()\n    except RecursionError:\n        pass",
        ("raised", "TimeoutError"),
    ),
    Case("recursion", "def f(n):\n    return f(n + 1)\nf(0)", ("raised", "RecursionError")),
    Case("lambda-recursion", "f = lambda n: f(n + 1)\nf(0)", ("raised", "RecursionError")),
    Case(
        "method-recursion", "class A:\n    def m(self):\n        return self.m()\nA().m()", ("raised", "RecursionError")
    ),
    Case(
        "recursion-in-comprehension",
        "def f(n):\n    return [f(n + 1) for _ in range(1)]\nf(0)",
        ("raised", "RecursionError"),
    ),
    Case("endless-loop", "while True:\n    pass", ("raised", "TimeoutError")),
    Case("endless-for-range", "for i in range(10**18):\n    pass", ("raised", "TimeoutError")),
    Case("sorted-huge", "sorted(range(10**9))", ("raised_re", r"^(MemoryError|TimeoutError)")),
    Case("output-flood-loop", "while True:\n    print('y' * 1000)", ("raised", "TimeoutError")),
    Case(
        "output-one-huge-print",
        "print('z' * (20 * 1024 * 1024))\n1",
        ("complete", 1),
        max_stdout=10 * 1024 * 1024 + 200,
    ),
    Case("deep-data-nesting-set", "x = 0\nfor i in range(100000):\n    x = frozenset([x])\n1", ("complete", 1)),
    Case(
        "deep-source-nesting-if",
        "".join(" " * i + "if True:\n" for i in range(400)) + " " * 400 + "x = 1\n",
        ("raised", "SyntaxError"),
    ),
    Case("deep-source-parens", "(" * 5000 + "1" + ")" * 5000, ("raised", "SyntaxError")),
    Case("huge-return-value", "'r' * (16 * 1024 * 1024)", ("complete", "r" * (16 * 1024 * 1024))),
    Case(
        "huge-tool-argument",
        "len(call_tool('echo', {'a': 'q' * (16 * 1024 * 1024)})['a'])",
        ("complete", 16 * 1024 * 1024),
    ),
    Case(
        "many-tool-calls",
        "n = 0\nfor i in range(2000):\n    n += call_tool('echo', {'i': i})['i']\nn",
        ("complete", sum(range(2000))),
    ),
    Case("huge-source", "x = 1\n" * 200000 + "x", ("complete", 1)),
    # Scripts are capped at MAX_SCRIPT_BYTES (4 MiB): an 8 MiB literal is refused before parsing.
    Case(
        "huge-string-literal",
        "len('" + "a" * (8 * 1024 * 1024) + "')",
        ("raised", "SyntaxError: the script is too long"),
    ),
    Case("large-string-literal", "len('" + "a" * (3 * 1024 * 1024) + "')", ("complete", 3 * 1024 * 1024)),
]

PROTOCOL = [
    Case("bare-call-of-tool", "fetch_cart(1)", ("raised", "NameError")),
    Case("call-tool-kwargs", "call_tool('echo', a=1)", ("raised", "TypeError")),
    Case("call-tool-no-name", "call_tool()", ("raised", "TypeError")),
    Case("call-tool-int-name", "call_tool(1, {})", ("raised", "TypeError")),
    Case("call-tool-three-args", "call_tool('echo', {}, {})", ("raised", "TypeError")),
    Case("call-tool-list-args", "call_tool('echo', [1, 2])", ("raised", "TypeError")),
    Case("call-tool-int-key", "call_tool('echo', {1: 2})", ("raised", "TypeError")),
    # SPEC §3 v3: sets and frozensets cross the boundary both ways; other values still do not.
    Case("call-tool-set-value", "call_tool('echo', {'a': {1, 2}})", ("complete", {"a": {1, 2}})),
    Case(
        "call-tool-frozenset-key",
        "call_tool('echo', {'a': {frozenset({1}): 'x'}})",
        ("complete", {"a": {frozenset({1}): "x"}}),
    ),
    Case("call-tool-complex-value", "call_tool('echo', {'a': 1j})", ("raised", "TypeError")),
    Case("call-tool-function-value", "def f():\n    pass\ncall_tool('echo', {'a': f})", ("raised", "TypeError")),
    Case("call-tool-object-value", "class A:\n    pass\ncall_tool('echo', {'a': A()})", ("raised", "TypeError")),
    Case(
        "call-tool-too-deep-value",
        "x = []\nfor i in range(300):\n    x = [x]\ncall_tool('echo', {'a': x})",
        ("raised", "TypeError"),
    ),
    Case(
        "call-tool-awaited",
        "import asyncio\nasync def m():\n    return await call_tool('echo', {})\nasyncio.run(m())",
        ("complete", {}),
    ),
    Case(
        "call-tool-gathered",
        "import asyncio\nr = await asyncio.gather(*[call_tool('echo', {'i': i}) for i in range(3)])\nr",
        ("complete", [{"i": 0}, {"i": 1}, {"i": 2}]),
    ),
    Case(
        "call-tool-gathered-bad-argument",
        "import asyncio\nclass A:\n    pass\ntry:\n    await asyncio.gather(call_tool('echo', {'a': A()}))\n"
        "except TypeError:\n    r = 'caught'\nr",
        ("complete", "caught"),
    ),
    Case(
        "call-tool-aliased",
        "f = call_tool\nf('echo', {'a': 1})",
        ("raised", "NameError: name 'call_tool' is not defined"),
    ),
    Case("call-tool-huge-name", "call_tool('n' * 100000)", ("complete", None)),
    Case(
        "call-tool-catch-refusal",
        "try:\n    call_tool(1)\nexcept TypeError as e:\n    r = 'caught'\nr",
        ("complete", "caught"),
    ),
    Case("result-set", "{1, 2}", ("complete", {1, 2})),
    Case("result-frozenset-in-set", "{frozenset({1}), 2}", ("complete", {frozenset({1}), 2})),
    Case("result-complex", "1j", ("raised", "TypeError")),
    Case("result-function", "def f():\n    pass\nf", ("raised", "TypeError")),
    Case("result-class", "class A:\n    pass\nA", ("raised", "TypeError")),
    Case("result-instance", "class A:\n    pass\nA()", ("raised", "TypeError")),
    Case("result-module", "import json\njson", ("raised", "TypeError")),
    Case("result-nan-and-inf", "[float('nan') != float('nan'), float('inf')]", ("complete", [True, float("inf")])),
    Case("result-cycle", "x = []\nx.append(x)\nx", ("raised", "TypeError")),
    Case(
        "resume-with-set",
        "call_tool('t')",
        ("complete", {1, 2}),
        driver="resume_set",
    ),
    Case(
        "resume-with-object",
        "call_tool('t')",
        ("host_error", "ValueConversionError", "value is an object"),
        driver="resume_object",
    ),
    Case(
        "resume-too-deep",
        "call_tool('t')",
        ("host_error", "ValueConversionError", "nests deeper than"),
        driver="resume_deep",
    ),
    Case(
        "resume-lone-surrogate",
        "call_tool('t')",
        ("host_error", "ValueConversionError", "lone surrogates"),
        driver="resume_surrogate",
    ),
    Case("resume-not-an-outcome", "call_tool('t')", ("host_error", "TypeError", "ResumeValue"), driver="resume_junk"),
    Case(
        "resume-system-exit",
        "try:\n    call_tool('t')\nexcept Exception as e:\n    r = str(e)\nr",
        ("complete", "bye"),
        driver="resume_system_exit",
    ),
    Case(
        "resume-unknown-exc-type",
        "try:\n    call_tool('t')\nexcept RuntimeError as e:\n    r = str(e)\nr",
        ("complete", "odd"),
        driver="resume_unknown_exc",
    ),
    Case("resume-twice", "call_tool('t')", ("host_error", "CodeRuntimeError", "single use"), driver="resume_twice"),
    Case(
        "dump-after-resume",
        "call_tool('t')",
        ("host_error", "CodeRuntimeError", "single use"),
        driver="dump_after_resume",
    ),
    Case(
        "resume-other-runtimes-key",
        "call_tool('t')",
        ("host_error", "SnapshotError", "signed"),
        driver="resume_wrong_key",
    ),
    Case("resume-snapshot-as-many-times", "call_tool('t') + 1", ("complete", [2, 3, 4]), driver="resume_many"),
]

FAMILIES: dict[str, list[Case]] = {
    "filesystem": FILESYSTEM,
    "environment": ENVIRONMENT,
    "interpreter": INTERPRETER,
    "resources": RESOURCES,
    "protocol": PROTOCOL,
}
