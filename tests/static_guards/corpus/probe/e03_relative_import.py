"""row: relative import"""
from . import secret  # expect: KG001
from .secret import value  # expect: KG001

print(secret, value)
