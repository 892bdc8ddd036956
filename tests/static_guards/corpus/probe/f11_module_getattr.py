"""row: __builtins__: module __getattr__ bound to __builtins__.get"""
from probe import TARGET

__getattr__ = __builtins__.get  # expect: KG008

from probe import f11_module_getattr as me  # noqa: E402

me.open(TARGET)
