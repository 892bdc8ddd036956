"""row: shadowing: annotation without a value is no binding"""
from probe import TARGET

open: int
open(TARGET)  # expect: KG004
