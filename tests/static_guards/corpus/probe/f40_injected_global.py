"""row: adversarial: an unguarded module hands this one os as a global it never binds"""
from probe import injector  # binds `tool` here

tool.system("true")  # expect-run: KG013
