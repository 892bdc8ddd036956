"""row: transitive reach through a re-export"""
from probe.reexport import run  # expect: KG007

run(["true"], check=False)
