"""row: introspection: function __globals__"""
from probe import TARGET


def g() -> None:
    pass


g.__globals__["__builtins__"]["open"](TARGET)  # expect: KG008 KG008
