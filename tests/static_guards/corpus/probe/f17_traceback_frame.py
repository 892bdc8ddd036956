"""row: introspection: traceback tb_frame"""
from probe import TARGET

try:
    1 / 0
except ZeroDivisionError as e:
    e.__traceback__.tb_frame.f_builtins["open"](TARGET)  # expect: KG008 KG008
