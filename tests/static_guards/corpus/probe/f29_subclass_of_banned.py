"""row: subclass: a subclass of a banned class is that class"""
import io

from probe import TARGET


class Quiet(io.FileIO):  # expect: KG004
    pass


Quiet(TARGET)  # expect: KG004
