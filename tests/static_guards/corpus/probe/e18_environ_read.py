"""row: os.environ as an attribute read"""
import os

home = os.environ["HOME"]  # expect: KG004
user = os.environ.get("USER")  # expect: KG004
