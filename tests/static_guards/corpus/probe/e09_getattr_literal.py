"""row: getattr(module, "literal")"""
import os

getattr(os, "system")("true")  # expect: KG004
