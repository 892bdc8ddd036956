X = 1
# -*- coding: utf-7 -*-
"""row: lexical: coding cookie on line 2 after code (Python ignores it)"""
from probe import TARGET

s = "+ACI-"; open(TARGET); t = "+ACI-"  # expect: KG004
