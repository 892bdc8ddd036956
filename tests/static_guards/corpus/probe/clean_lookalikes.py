"""row: look-alikes that are not the forbidden objects (must pass)"""
from __future__ import annotations

import datetime
import re

compile = re.compile  # a module-level name that shadows the builtin on purpose
PATTERN = compile(r"os\.system")
NOTE = "os.system and open() in a string are not calls"  # nor is os.environ in a comment


class Shell:
    """Has methods named like forbidden functions."""

    def system(self, cmd: str) -> str:
        return cmd

    def open(self) -> Shell:
        return self


def use(open: Shell, time: int) -> object:  # parameters shadow the builtin/module names
    sh = Shell()
    sh.system("true")
    environ = {"HOME": "/"}
    return open.open(), time, environ["HOME"], datetime.datetime(2020, 1, 1)
