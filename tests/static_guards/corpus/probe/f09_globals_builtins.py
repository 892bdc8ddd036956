"""row: __builtins__: globals()["__builtins__"]"""
from probe import TARGET

globals()["__builtins__"]["open"](TARGET)  # expect: KG008 KG008
