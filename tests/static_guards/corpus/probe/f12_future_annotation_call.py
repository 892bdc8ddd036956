"""row: annotations: call in an annotation under the future import"""
from __future__ import annotations

import typing

from probe import TARGET


def f(x: open(TARGET)) -> None:  # expect: KG004
    del x


typing.get_type_hints(f)
