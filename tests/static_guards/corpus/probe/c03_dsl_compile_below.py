"""row: false positive: a module's own eval defined below its first use (must pass)"""


def render(source: str) -> str:
    return eval(source)


def eval(source: str) -> str:  # a template language's own evaluator
    return source.upper()


RESULT = render("x")
