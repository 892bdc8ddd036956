"""row: reach-through: import dbm.dumb, then dbm.dumb._os.system (import a.b, no from)"""
import dbm.dumb

dbm.dumb._os.system("true")  # expect: KG004
