"""row: annotations: string annotation"""
import typing

from probe import TARGET


def f(x: "open(TARGET)") -> None:  # expect: KG004
    del x


typing.get_type_hints(f)
