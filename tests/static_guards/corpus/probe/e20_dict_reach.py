"""row: vars(module)["name"] / module.__dict__["name"]"""
import os

vars(os)["system"]("true")  # expect: KG004
os.__dict__["system"]("true")  # expect: KG004
