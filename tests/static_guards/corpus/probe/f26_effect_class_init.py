"""row: effect map: gzip.open builds a GzipFile whose __init__ opens the path"""
import gzip

from probe import TARGET

gzip.open(TARGET)  # expect: KG012
