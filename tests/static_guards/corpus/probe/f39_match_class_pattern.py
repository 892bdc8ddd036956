"""row: adversarial: a match class pattern reads a module attribute"""
import codecs

from probe import TARGET

match codecs:
    case object(builtins=b):
        match b:
            case object(open=opener):
                opener(TARGET)  # expect-run: KG013
