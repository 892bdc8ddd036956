"""row: typing evaluation: hand-written __annotations__, evaluated by get_type_hints"""
import typing

from probe import TARGET


def f(x):
    del x, TARGET


f.__annotations__ = {"x": "open(TARGET)"}  # expect: KG004
typing.get_type_hints(f)
