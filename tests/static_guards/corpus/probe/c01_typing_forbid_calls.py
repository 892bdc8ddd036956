"""row: false positive: allowed typing-only import of a module forbid-calls covers (must pass)"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from socket import socket


def f(s: socket) -> None:
    del s
