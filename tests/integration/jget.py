# jget.py PATH: a field of the JSON document on stdin, by a dotted PATH ("" for the whole),
# for the shell tests: strings raw, anything else as JSON, a missing field as "null", and
# "<not json>" when stdin is not JSON (a test then fails on the value, never on a traceback).
import json
import sys

try:
    d = json.load(sys.stdin)
except ValueError:
    print("<not json>")
    sys.exit(0)
for k in sys.argv[1].split(".") if sys.argv[1] else []:
    d = d.get(k) if isinstance(d, dict) else None
print("null" if d is None else d if isinstance(d, str) else json.dumps(d), end="")
