"""row: typing evaluation: a List["expr"] alias, evaluated by get_type_hints"""
import typing
from typing import List

from probe import TARGET

Paths = List["open(TARGET)"]  # expect: KG004


def f(x: Paths) -> None:
    del x, TARGET


typing.get_type_hints(f)
