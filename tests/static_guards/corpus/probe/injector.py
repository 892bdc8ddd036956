"""Unguarded helper of f40: gives the importing probe module `os` under a name it never
binds (an unguarded package module handing a pure one a capability)."""
import os
import sys

sys.modules["probe.f40_injected_global"].tool = os
