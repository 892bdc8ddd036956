"""row: __import__(non-literal)"""
name = "subpro" + "cess"
__import__(name)  # expect: KG005
