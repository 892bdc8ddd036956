"""row: import inside try"""
try:
    import socket  # expect: KG001
except ImportError:
    socket = None
