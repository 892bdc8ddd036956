"""row: importlib.import_module(non-literal)"""
from importlib import import_module

name = "sock" + "et"
import_module(name)  # expect: KG005
