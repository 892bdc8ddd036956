"""row: false positive: TYPE_CHECKING imported under another name (must pass)"""
from __future__ import annotations

from typing import TYPE_CHECKING as TC

if TC:
    import socket


def f(s: socket.socket) -> None:
    del s
