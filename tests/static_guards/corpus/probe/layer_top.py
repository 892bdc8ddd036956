"""A higher layer for e23_layers (helper)."""

VALUE = 1
