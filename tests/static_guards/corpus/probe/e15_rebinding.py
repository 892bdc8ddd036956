"""row: re-binding f = os.system; f()"""
import os

f = os.system  # expect: KG004
f("true")  # expect: KG004
