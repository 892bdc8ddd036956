"""row: adversarial: getattr through functools.reduce on a computed path"""
import codecs
import functools

from probe import TARGET

opener = functools.reduce(getattr, ["buil" + "tins", "op" + "en"], codecs)
opener(TARGET)  # expect-run: KG013
