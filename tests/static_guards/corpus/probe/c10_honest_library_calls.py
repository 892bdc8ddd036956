"""row: false positive: honest library calls under the effect map (re, json, attrs) (must pass)"""
import json
import re

import attrs

PATTERN = re.compile(r"\d+", re.ASCII)
TEXT = json.dumps({"a": [1, 2]}, sort_keys=True)
WORDS = re.findall(r"\w+", TEXT)


@attrs.frozen
class Point:
    x: int = attrs.field(default=0)
