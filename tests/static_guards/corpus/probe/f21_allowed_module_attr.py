"""row: reach-through: a module attribute of an allowed module (json.codecs)"""
import json

from probe import TARGET

json.codecs.open(TARGET)  # expect: KG002
