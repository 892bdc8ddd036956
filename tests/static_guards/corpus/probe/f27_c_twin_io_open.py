"""row: C twin: _io.open is the builtin open"""
import _io

from probe import TARGET

_io.open(TARGET)  # expect: KG004
