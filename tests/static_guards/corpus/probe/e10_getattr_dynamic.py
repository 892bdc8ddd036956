"""row: getattr(module, non-literal)"""
import os

name = "sys" + "tem"
getattr(os, name)("true")  # expect: KG005
