"""row: introspection: generator gi_frame"""
from probe import TARGET

gen = (x for x in [1])
gen.gi_frame.f_builtins["open"](TARGET)  # expect: KG008 KG008
