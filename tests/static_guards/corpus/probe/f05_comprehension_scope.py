"""row: shadowing: name bound only inside a comprehension"""
from probe import TARGET


def reach() -> object:
    [0 for open in ()]
    return open(TARGET)  # expect: KG004


reach()
