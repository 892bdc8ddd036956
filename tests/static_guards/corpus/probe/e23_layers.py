"""row: layers: a lower layer imports a higher one"""
from probe import layer_top  # expect: KG009

X = layer_top.VALUE
