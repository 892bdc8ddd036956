"""row: import x as y"""
import subprocess as sp  # expect: KG001

sp.run(["true"], check=False)  # expect: KG004
