"""row: fake TYPE_CHECKING = True guard"""
TYPE_CHECKING = True

if TYPE_CHECKING:
    import socket  # expect: KG001
