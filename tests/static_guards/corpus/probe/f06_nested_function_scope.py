"""row: shadowing: name bound only inside a nested function"""
from probe import TARGET


def reach() -> object:
    def inner() -> None:
        open = len
        del open

    inner()
    return open(TARGET)  # expect: KG004


reach()
