"""row: typing evaluation: ForwardRef("expr")._evaluate runs the string"""
import typing

from probe import TARGET

REF = typing.ForwardRef("open(TARGET)")  # expect: KG004
REF._evaluate({"TARGET": TARGET}, None, recursive_guard=frozenset())
