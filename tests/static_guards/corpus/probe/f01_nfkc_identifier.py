"""row: lexical: identifier in fullwidth letters (NFKC-folded to open)"""
from probe import TARGET

ｏｐｅｎ(TARGET)  # expect: KG004
