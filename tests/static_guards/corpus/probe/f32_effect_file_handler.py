"""row: effect map: logging.FileHandler opens its file in __init__"""
import logging

from probe import TARGET

logging.FileHandler(TARGET)  # expect: KG012
