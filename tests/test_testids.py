"""kernel.effects.testids: unknown unittest and pytest ids found statically, undecidable
ones left to calibration."""

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
        ("tests/test_a.py::test_x", True),
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


PYTEST_FILES = {
    "tests/test_p.py": (
        "import pytest\nfrom helpers import test_shared, Base as Imported\n\n\n"
        "@pytest.mark.parametrize('n', [1, 2])\ndef test_param(n):\n    assert n\n\n\n"
        "class TestPlain:\n    def test_m(self):\n        pass\n\n\n"
        "class TestChild(Base):\n    pass\n\n\n"
        "@decorate\nclass TestDecorated:\n    pass\n\n\n"
        "if True:\n    def test_conditional():\n        pass\n"
    ),
    "tests/test_star.py": "from helpers import *\n",
    "tests/test_dynamic.py": "for n in range(3):\n    globals()[f'test_{n}'] = lambda: None\n",
    "tests/test_broken.py": "def (:\n",
}


@pytest.mark.parametrize(
    ("node_id", "unknown"),
    [
        ("tests/test_p.py::test_param", False),
        ("tests/test_p.py::test_param[1]", False),
        ("tests/test_p.py::test_param[anything-calibration-decides]", False),
        ("tests/test_p.py::test_paramm[1]", True),
        ("tests/test_p.py::TestPlain", False),
        ("tests/test_p.py::TestPlain::test_m", False),
        ("tests/test_p.py::TestPlain::test_n", True),
        ("tests/test_p.py::TestMissing::test_m", True),
        ("tests/test_p.py::test_missing", True),
        ("tests/test_p.py::TestChild::test_inherited", False),
        ("tests/test_p.py::TestDecorated::test_added", False),
        ("tests/test_p.py::test_shared", False),
        ("tests/test_p.py::Imported::test_x", False),
        ("tests/test_p.py::test_conditional", False),
        ("tests/test_star.py::test_anything", False),
        ("tests/test_dynamic.py::test_1", False),
        ("tests/test_broken.py::test_x", False),
        ("tests/test_absent.py::test_x", True),
        ("test_p.py::test_param", True),
    ],
)
def test_pytest_node_ids(node_id: str, unknown: bool) -> None:
    """A pytest node id is unknown when its file is absent from the baseline or surely
    defines no such function, class or method (a parametrized id: the function). Left
    to calibration: the parameter part, a name that an import, a compound statement, a
    star import or code may bind, a method a base class or a decorator may bring, a
    syntax error."""
    assert unknown_test_ids([node_id], PYTEST_FILES.get) == ((node_id,) if unknown else ())


def test_unittest_names_bound_by_imports_are_left_to_calibration() -> None:
    """A test class imported into the declared module is collected by unittest: never
    called unknown (a refused valid config is worse than a late refusal)."""
    files = {"pkg/test_b.py": "from pkg.common import SharedTests\nimport pkg.other as Other\n"}
    assert unknown_test_ids(["pkg.test_b.SharedTests.test_x"], files.get) == ()
    assert unknown_test_ids(["pkg.test_b.Other.test_x"], files.get) == ()
    assert unknown_test_ids(["pkg.test_b.Missing.test_x"], files.get) == (
        "pkg.test_b.Missing.test_x",
    )
