"""row: false positive: a recursive def eval (must pass)"""


def eval(node: list[object]) -> int:
    return 1 + sum(eval(child) for child in node if isinstance(child, list))


DEPTH = eval([[], [[]]])
