"""row: effect map: timeit.timeit runs the text it is handed (exec inside timeit)"""
import timeit

from probe import TARGET

timeit.timeit(f"open({TARGET!r})", number=1)  # expect: KG012
