"""row: allow-list (only typing and probe may be imported)"""
import json  # expect: KG002
from typing import Any

from probe import secret

x: Any = json.dumps(secret.value)
