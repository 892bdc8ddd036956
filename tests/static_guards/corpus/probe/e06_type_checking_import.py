"""row: if TYPE_CHECKING import (reported separately)"""
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import socket  # expect: KG006


def f(s: "socket.socket") -> None:
    del s
