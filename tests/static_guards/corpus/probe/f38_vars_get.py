"""row: adversarial: vars(module).get with a computed key"""
import codecs

from probe import TARGET

opener = vars(vars(codecs).get("buil" + "tins")).get("op" + "en")
opener(TARGET)  # expect-run: KG013
