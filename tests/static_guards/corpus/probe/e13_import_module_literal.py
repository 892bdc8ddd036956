"""row: importlib.import_module("literal")"""
import importlib

sock = importlib.import_module("socket")  # expect: KG001
