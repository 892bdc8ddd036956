"""row: __builtins__: match mapping pattern"""
from probe import TARGET

match globals():  # expect: KG008
    case {"__builtins__": {"open": reach}}:  # expect: KG008
        reach(TARGET)
