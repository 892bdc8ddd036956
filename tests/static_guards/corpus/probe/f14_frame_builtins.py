"""row: introspection: frame f_builtins"""
import sys

from probe import TARGET

sys._getframe().f_builtins["open"](TARGET)  # expect: KG008 KG008
