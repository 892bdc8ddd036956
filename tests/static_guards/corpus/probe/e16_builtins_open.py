"""row: builtins.open"""
import builtins

builtins.open("/etc/hostname").close()  # expect: KG004
