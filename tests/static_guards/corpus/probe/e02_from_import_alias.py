"""row: from x import y as z"""
from os import system as s  # expect: KG004

s("true")  # expect: KG004
