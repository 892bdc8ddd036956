"""row: introspection: sys.meta_path importer"""
import sys

for finder in sys.meta_path:  # expect: KG008
    spec = finder.find_spec("socket", None)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(type(sys)("socket"))
        break
