"""row: introspection: __loader__"""
from probe import TARGET

__loader__.get_data(TARGET)  # expect: KG008
