"""row: false positive: del of a function's own local named like the shadow (must pass)"""
from probe import TARGET

open = len  # the module's own open


def scratch() -> None:
    open = 1
    del open


def size(name: str) -> int:
    return open(name)


scratch()
SIZE = size(TARGET)
