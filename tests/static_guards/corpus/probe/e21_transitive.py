"""row: transitive reach through a project module"""
from probe import chain_mid  # expect: KG007

chain_mid.run(["true"], check=False)
