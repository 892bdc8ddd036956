"""row: effect map: codecs.open opens a file in its own source (rule with effects)"""
import codecs

from probe import TARGET

codecs.open(TARGET)  # expect: KG012
