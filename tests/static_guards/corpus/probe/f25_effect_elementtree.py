"""row: effect map: ElementTree.parse(path) opens it through a method of a class"""
from xml.etree import ElementTree

from probe import TARGET

ElementTree.parse(TARGET)  # expect: KG012
