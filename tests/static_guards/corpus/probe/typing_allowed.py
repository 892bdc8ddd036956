"""row: typing-only import that the rule allows (must pass)"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import socket


def f(s: socket.socket) -> None:
    del s
