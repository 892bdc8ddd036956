"""row: false positive: locals() under a rule that bans only imports and calls (must pass)"""


def snapshot(a: int, b: int) -> dict[str, object]:
    return dict(locals())


STATE = snapshot(1, 2)
