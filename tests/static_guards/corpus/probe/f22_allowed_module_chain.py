"""row: reach-through: dataclasses.inspect.os"""
import dataclasses

dataclasses.inspect.os.system("true")  # expect: KG002 KG002 KG004
