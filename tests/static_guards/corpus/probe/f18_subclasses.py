"""row: introspection: object.__subclasses__"""
for c in object.__subclasses__():  # expect: KG008
    if c.__name__ == "_wrap_close":
        c.__init__.__globals__["system"]("true")  # expect: KG008
