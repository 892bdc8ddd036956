"""row: shadowing: del of the shadowing name"""
from probe import TARGET

open = len
del open
open(TARGET)  # expect: KG004
