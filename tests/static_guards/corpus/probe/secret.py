"""A project module that the probe rules forbid (target of the relative-import row)."""
value = 1
