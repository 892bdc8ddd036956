"""row: qualified call through an alias (datetime.datetime.now)"""
from datetime import datetime as dt

stamp = dt.now()  # expect: KG004
