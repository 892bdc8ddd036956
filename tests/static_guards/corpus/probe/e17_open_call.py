"""row: call ban (open, eval, exec)"""
with open("/etc/hostname") as fh:  # expect: KG004
    fh.read()
eval("1 + 1")  # expect: KG004
exec("x = 1")  # expect: KG004
