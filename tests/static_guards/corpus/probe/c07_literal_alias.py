"""row: false positive: Literal["open"] under another name (must pass)"""
import typing
from typing import Literal as L


def mode(m: L["open", "eval"]) -> typing.Optional[L["exec"]]:
    return None


HINTS = typing.get_type_hints(mode)
