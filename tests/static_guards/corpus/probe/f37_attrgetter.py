"""row: adversarial: operator.attrgetter with a computed dotted name"""
import codecs
import operator

from probe import TARGET

opener = operator.attrgetter("buil" + "tins.op" + "en")(codecs)
opener(TARGET)  # expect-run: KG013
