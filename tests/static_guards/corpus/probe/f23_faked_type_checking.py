"""row: false negative of trust: a faked typing.TYPE_CHECKING"""
import typing

typing.TYPE_CHECKING = True  # expect: KG008

if typing.TYPE_CHECKING:
    import socket  # expect: KG001

    del socket
