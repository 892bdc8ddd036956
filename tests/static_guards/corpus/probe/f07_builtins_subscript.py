"""row: __builtins__: subscript"""
from probe import TARGET

__builtins__["open"](TARGET)  # expect: KG004 KG008
