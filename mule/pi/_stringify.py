"""JSON text as JavaScript's `JSON.stringify` writes it: compact, and numbers in JS's form.

JavaScript has one number type: pi writes a zero cost as `0` where Python writes `0.0`, and
`0.000036` where Python writes `3.6e-05`. `js_number` turns integral floats into ints while
values are unstructured (so the standard library's C encoder writes them as JS does); the
rarer small floats, which Python writes in exponent form below 1e-4, are rewritten in the text
by `stringify` only when an exponent can be there at all.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

_SAFE = 2.0**53  # every integral float in this range is exactly the int of the same value
_JS_FIXED = 1e21  # JS writes integers below this without an exponent


def js_number(x: float) -> int | float:
    """Return `x` as JavaScript would hold it: an integral float becomes an int.

    Beyond 2**53, JS prints the shortest digits that identify the float, then zeros (as
    Python's `repr` chooses the digits): 2.0**60 is 1152921504606847000, not 2**60. From 1e21
    on, both write an exponent (`1e+21`). NaN and infinities are left to the JSON writer.

    >>> js_number(0.0), js_number(-0.0), js_number(2.5), js_number(1e20)
    (0, 0, 2.5, 100000000000000000000)
    """
    if -_SAFE <= x <= _SAFE:
        i = int(x)
        return i if i == x else x
    if -_JS_FIXED < x < _JS_FIXED:
        return int(Decimal(repr(x)))
    return x


# A JSON string (skipped as a whole), or a number in Python's exponent form with a negative
# exponent: json.dumps writes floats with float.__repr__, which always has one leading digit.
_STRING_OR_EXPONENT = re.compile(r'"(?:[^"\\]|\\.)*"|(-?)([1-9])(?:\.([0-9]+))?e-([0-9]+)')


def _js_exponent(m: re.Match[str]) -> str:
    lead = m.group(2)
    if lead is None:
        return m.group(0)
    sign, rest, exponent = m.group(1), m.group(3) or "", int(m.group(4))
    # The value is 0.<digits> x 10^n, n = 1 - exponent; JS writes fixed notation from n > -6.
    n = 1 - exponent
    if n > -6:
        return f"{sign}0.{'0' * -n}{lead}{rest}"
    return f"{sign}{lead}{'.' if rest else ''}{rest}e-{exponent}"


_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def stringify(data: Any) -> str:
    """Return compact JSON text of JSON-compatible `data`, numbers written as JavaScript does.

    Non-ASCII is kept raw, as `JSON.stringify` keeps it. Integral floats should already be
    ints (`js_number`, which the wire codecs apply); small floats are fixed up here.

    >>> stringify({"cost": 0.000036, "tiny": 1.5e-07, "text": "1e-05"})
    '{"cost":0.000036,"tiny":1.5e-7,"text":"1e-05"}'
    """
    text = _encode(data)
    return _STRING_OR_EXPONENT.sub(_js_exponent, text) if "e-" in text else text


__all__ = ["js_number", "stringify"]
