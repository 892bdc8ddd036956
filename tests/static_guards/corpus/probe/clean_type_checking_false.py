"""row: TYPE_CHECKING = False idiom with an allowed module (must pass)"""
TYPE_CHECKING = False

if TYPE_CHECKING:
    import collections

    Counter = collections.Counter
