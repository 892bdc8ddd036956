"""row: false positive: ordinary string annotations, aliases and forward references (must pass)"""
import typing
from typing import Dict, List, Optional


class Node:
    children: List["Node"]
    parent: "Optional[Node]"


Tree = Dict[str, "Node"]
LATER = typing.ForwardRef("Node")


def walk(tree: Tree) -> "List[Node]":
    return list(tree.values())


def f(x):
    return x


f.__annotations__ = {"x": "Node"}
HINTS = (typing.get_type_hints(walk), typing.get_type_hints(Node), typing.get_type_hints(f))
