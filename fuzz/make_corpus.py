"""Writes the seed corpus (``fuzz/corpus``): one file per seed, first byte = target."""

from pathlib import Path

SCRIPTS = [
    "1 + 1",
    'x = call_tool("t", {"a": 1})\n[x, x]',
    "def f(n):\n    return f(n + 1)\nf(0)",
    "while True:\n    pass",
    "from pathlib import Path\nPath('/etc/passwd').read_text()",
    "import os\nos.getenv('HOME')",
    "'x' * 10**9",
    "[" * 300 + "]" * 300,
    "import json\njson.loads('[1, {\"a\": null}]')",
    "try:\n    call_tool(1)\nexcept TypeError as e:\n    r = str(e)\nr",
    "import asyncio\nasync def m():\n    return 1\nasyncio.run(m())",
    "class A:\n    def __init__(self):\n        self.x = call_tool('t')\nA().x",
    "s = 0\nfor i in range(call_tool('n')):\n    s += i\ns",
    "{b'k': 1}",
]
out = Path(__file__).parent / "corpus"
out.mkdir(exist_ok=True)
for i, s in enumerate(SCRIPTS):
    (out / f"script-{i:02d}").write_bytes(b"\x00\xff" + s.encode() + b"\x00\x01\x02\x03")
for i in range(4):
    (out / f"snapshot-{i:02d}").write_bytes(bytes([1]) + bytes(range(i * 7, i * 7 + 12)))
for i in range(4):
    (out / f"value-{i:02d}").write_bytes(bytes([2]) + bytes((i * 37 + j * 11) % 256 for j in range(40)))
