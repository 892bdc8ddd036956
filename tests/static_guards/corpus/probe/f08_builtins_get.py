"""row: __builtins__: .get"""
from probe import TARGET

__builtins__.get("open")(TARGET)  # expect: KG008
