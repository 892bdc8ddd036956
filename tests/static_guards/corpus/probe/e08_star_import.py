"""row: star import"""
from os import *  # expect: KG003

system("true")
