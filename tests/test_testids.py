"""kernel.effects.testids: unknown unittest ids found statically, undecidable ones left."""

from __future__ import annotations

import pytest

from kernel.effects.testids import unknown_test_ids

FILES = {
    "pkg/test_a.py": (
        "import unittest\nfrom elsewhere import Mixin\n\n\n"
        "class A(unittest.TestCase):\n    def test_x(self):\n        pass\n"
        "    test_alias = test_x\n\n\n"
        "class B(Mixin, unittest.TestCase):\n    pass\n\n\n"
        "def test_function():\n    pass\n"
    ),
    "broken.py": "def (:\n",
}


@pytest.mark.parametrize(
    ("test_id", "unknown"),
    [
        ("pkg.test_a.A.test_x", False),
        ("pkg.test_a.A.test_alias", False),
        ("pkg.test_a.A", False),
        ("pkg.test_a.test_function", False),
        ("pkg.test_a.A.test_y", True),
        ("pkg.test_a.C.test_x", True),
        ("pkg.test_a.B.test_inherited", False),
        ("pkg.test_a.test_function.sub", False),
        ("broken.A.test_x", False),
        ("absent.A.test_x", False),
        ("tests/test_a.py::test_x", False),
        ("single", False),
    ],
)
def test_only_what_is_surely_absent_is_unknown(test_id: str, unknown: bool) -> None:
    """Unknown: a class or method the module file does not define. Left to calibration:
    an inherited method from a base elsewhere, a syntax error, a missing module file, a
    pytest node id, a name that is not dotted."""
    found = unknown_test_ids([test_id], FILES.get)
    assert found == ((test_id,) if unknown else ())


def test_source_that_warns_is_still_read() -> None:
    """Old code with invalid escape sequences (a SyntaxWarning, an error under this
    suite's filterwarnings) is read like any other."""
    files = {
        "old.py": 'import re\nPAT = "\\d+"\n\n\nclass T:\n    def test_a(self):\n        pass\n'
    }
    assert unknown_test_ids(["old.T.test_a"], files.get) == ()
    assert unknown_test_ids(["old.T.test_b"], files.get) == ("old.T.test_b",)
