"""Importers: pure readers that turn another tool's documents into kernel records.

Each importer is one module named after the format it reads (`kernel.importers.idkmesh`
reads IDKMesh v0.1 run documents). An importer only parses and refuses; it never
touches files itself (the effect shell reads the bytes and hands the decoded document here).
"""

__all__: list[str] = []
