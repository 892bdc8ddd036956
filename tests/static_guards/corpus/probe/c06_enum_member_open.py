"""row: false positive: an enum member named open (must pass)"""
import enum


class Door(enum.Enum):
    open = "open"
    shut = "shut"
    DEFAULT = open


STATE = Door.open
