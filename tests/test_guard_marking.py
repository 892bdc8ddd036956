"""The reference pass visits only the lines that can change its output: the spellings
that must still be visited when a direct call of `getattr` or `hasattr`, or a quiet
attribute of a module interesting only through its imports, no longer marks its line
(docs/guard.md, issue 21's sixth round)."""

from __future__ import annotations

import pytest

from kernel.guard import Policy, Rule, check_source

POLICY = Policy(
    rules=(
        Rule(name="r", modules=("m",), forbid_imports=("subprocess",), forbid_calls=("os.system",)),
    )
)
_TRY_OS = "import os\ntry:\n    import foo as x\nexcept ImportError:\n    x = os\n"


def _codes(src: str) -> list[tuple[int, str]]:
    return [(v.line, v.code.value) for v in check_source(src, POLICY, module="m")]


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        # getattr under another name: the binding is visited, then its calls
        ("import os\ng = getattr\ndef f(n):\n    g(os, n)\n", [(4, "KG005")]),
        ("import os\ng = (\n    getattr)\ng(os, 'system')('ls')\n", [(4, "KG004")]),
        ("import os\nfrom builtins import getattr as ga\nga(os, 'system')\n", [(3, "KG004")]),
        ("import os\n(getattr)(os, 'system')\n", [(2, "KG004")]),
        ("import os\ngetattr \\\n(os, 'system')\n", [(2, "KG004")]),
        # the object named on another line of the call, or through a rebinding
        ("import os\ngetattr(\n    os,\n    'sys' 'tem')\n", [(2, "KG004")]),
        ("import os\ndef f(n):\n    return getattr(\n        os, n)\n", [(3, "KG005")]),
        (_TRY_OS + "def f(n):\n    getattr(x, n)\n", [(7, "KG005")]),
        (_TRY_OS + "def f(n):\n    x.system(n)\n", [(7, "KG004")]),
        ("import os\nimport json as x\nx = os\nx.system('ls')\n", [(4, "KG004")]),
        # the name `getattr` bound to something else is searched whatever follows it
        (
            "import os\nfrom os import system as getattr\ngetattr('ls')\n",
            [(2, "KG004"), (3, "KG004")],
        ),
        (
            "import os\ngetattr = os.system\ndef f():\n    getattr('ls')\n",
            [(2, "KG004"), (4, "KG004")],
        ),
    ],
)
def test_a_getattr_that_can_matter_is_visited(src: str, expected: list[tuple[int, str]]) -> None:
    assert _codes(src) == expected


@pytest.mark.parametrize(
    "key",
    ['"TYPE_CHECKING"', "'TYPE_' 'CHECKING'", '"TYPE\\x5fCHECKING"', '(\n    "TYPE_CHECKING")'],
)
@pytest.mark.parametrize("call", ["hasattr", "hasattr ", "setattr", "delattr"])
def test_every_spelling_of_faking_type_checking_is_found(call: str, key: str) -> None:
    tail = ", True)" if call == "setattr" else ")"
    src = f"import typing\n{call}(typing, {key}{tail}\n"
    assert _codes(src) == [(2, "KG008")]


_SYSTEM = "KG004"


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        # `shutil` is interesting only through what it imports (`shutil.os`)
        ("import shutil\nshutil.os.system(1)\n", [(2, _SYSTEM)]),
        ("import shutil\nshutil . os . system(1)\n", [(2, _SYSTEM)]),
        ("import shutil\nf = shutil.\\\n    os.system\n", [(2, _SYSTEM)]),
        ("import shutil\nf = (shutil\n    .os.system)\n", [(2, _SYSTEM)]),
        ("import shutil\nf = (shutil  # why\n    .os.system)\n", [(2, _SYSTEM)]),
        ("import shutil\n(shutil).os.system(1)\n", [(2, _SYSTEM)]),
        ("import shutil\nx = shutil\nx.os.system(1)\n", [(3, _SYSTEM)]),
        ("import shutil\ngetattr(shutil, 'os').system(1)\n", [(2, _SYSTEM)]),
        ("import shutil\nshutil.__dict__['os'].system(1)\n", [(2, _SYSTEM)]),
        ("import shutil\nvars(shutil)['os'].system(1)\n", [(2, _SYSTEM)]),
        ("import shutil\nf = [\n    shutil.copy,\n    shutil.os.system]\n", [(4, _SYSTEM)]),
        ("import shutil\nf = shutil.copy(shutil.os.system)\n", [(2, _SYSTEM)]),
        ("import tempfile\ntempfile._os.system(1)\n", [(2, _SYSTEM)]),
        ("import shutil\nshutil.TYPE_CHECKING = True\n", [(2, "KG008")]),
        # a submodule the package does not import is still reached through
        ("import ctypes\nctypes.util.subprocess\n", [(2, "KG001")]),
        # rebound: searched whole, or with the new module's quiet attributes
        ("import shutil, tempfile\nshutil = tempfile\nshutil._os.system(1)\n", [(3, _SYSTEM)]),
        # rebound to what is interesting itself: searched whole from then on
        ("import os\nimport shutil\nshutil = os\nshutil.system(1)\n", [(4, _SYSTEM)]),
        ("import os\nimport shutil\ndef f():\n    shutil.system(1)\nshutil = os\n", [(4, _SYSTEM)]),
    ],
)
def test_an_attribute_that_can_matter_is_visited(src: str, expected: list[tuple[int, str]]) -> None:
    assert _codes(src) == expected


def test_a_quiet_attribute_changes_nothing() -> None:
    assert _codes("import shutil\nshutil.copy(1)\nshutil.rmtree\n") == []


@pytest.mark.parametrize("reflection", [False, True])
def test_a_store_to_type_checking_on_any_module_is_found(reflection: bool) -> None:
    rule = Rule(name="r", modules=("m",), forbid_calls=("os.system",), forbid_reflection=reflection)
    src = "import json\njson.TYPE_CHECKING = True\n"
    found = check_source(src, Policy(rules=(rule,)), module="m")
    assert [(v.line, v.code.value) for v in found] == [(2, "KG008")]


@pytest.mark.parametrize(
    ("pattern", "src", "expected"),
    [
        # a rule forbidding getattr or hasattr itself: every direct call is a use
        ("getattr", "getattr(x, 'y')\n", [(1, "KG004")]),
        ("builtins.getattr", "def f(x):\n    return getattr(\n        x, 'y')\n", [(2, "KG004")]),
        ("hasattr", "hasattr(x, 'y')\n", [(1, "KG004")]),
        ("builtins.*", "hasattr(x, 'y')\n", [(1, "KG004")]),
        ("os.system", "getattr(x, 'y')\n", []),
    ],
)
def test_a_direct_call_of_a_forbidden_getattr_is_found(
    pattern: str, src: str, expected: list[tuple[int, str]]
) -> None:
    rule = Rule(name="r", modules=("m",), forbid_calls=(pattern,))
    found = check_source(src, Policy(rules=(rule,)), module="m")
    assert [(v.line, v.code.value) for v in found] == expected


@pytest.mark.parametrize(
    ("reflection", "expected"),
    [(False, [(2, "KG004")]), (True, [(2, "KG004"), (2, "KG008"), (3, "KG008")])],
)
def test_reflective_names_are_searched_under_forbid_reflection(
    reflection: bool, expected: list[tuple[int, str]]
) -> None:
    """Without forbid-reflection a reflective name is no finding of its own; with it,
    each is found."""
    rule = Rule(name="r", modules=("m",), forbid_calls=("eval",), forbid_reflection=reflection)
    src = "import sys\n__builtins__.eval('1')\nf = sys._getframe\n"
    found = check_source(src, Policy(rules=(rule,)), module="m")
    assert sorted((v.line, v.code.value) for v in found) == expected


@pytest.mark.parametrize("reflection", [False, True])
def test_a_line_naming_a_reflective_name_is_visited_under_every_rule(reflection: bool) -> None:
    """A visited line is read whole: the reflective name on it gets the other uses there
    resolved, whether or not a rule forbids reflection (the output of e4ebe9b, which the
    eighth round's speed steps must keep). ``h`` is ``io.open``, which is ``_io.open``;
    the name alone does not mark its line (`_interesting` does not see through it)."""
    rule = Rule(name="r", modules=("m",), forbid_calls=("_io.open",), forbid_reflection=reflection)
    src = "from io import open as h\nh(m.__loader__)\n"
    found = check_source(src, Policy(rules=(rule,)), module="m")
    expected = [(2, "KG004"), (2, "KG008")] if reflection else [(2, "KG004")]
    assert sorted((v.line, v.code.value) for v in found) == expected


def test_a_reach_through_on_a_line_naming_a_reflective_name_is_recorded() -> None:
    """The reach-throughs a file records are import facts the import graph follows
    (layers, transitive): a line naming a reflective name is visited without
    forbid-reflection too, and what it reaches is recorded."""
    from kernel.guard.scan import scan_source

    rule = Rule(name="r", modules=("m",), forbid_calls=("open",))
    src = (
        b"from importlib._bootstrap_external import SourcelessFileLoader\n"
        b"m.__loader__ = SourcelessFileLoader(1)\n"
    )
    imports, _findings = scan_source(src, module="m", rules=(rule,))
    assert [(i[0], i[2], i[4]) for i in imports if i[4].startswith("reach:")] == [
        ("importlib._bootstrap_external", 2, "reach:importlib._bootstrap_external")
    ]
