r"""The `format` checks pi-schema 1.6.0 applies (its `formats` map, adapted from TypeBox 1.3.27).

pi-ai passes every format pi-schema knows: the 2020-12 formats plus `url` and
`json-pointer-uri-fragment`. A format not in `FORMATS` is an annotation. The checks here are
written for Python from the grammars they test (RFC 3339 dates and times with leap seconds,
RFC 3986 URIs, RFC 4291 IPv6, RFC 6901 pointers, RFC 6570 templates); every regex is anchored
with `\Z` and ASCII, as JS's `^...$` without `m` and `u`.

Approximations (no JS runtime here): `url`, `iri` and `iri-reference` stand for WHATWG's
`URL.canParse` with a scheme-and-host test; `hostname` follows the LDH and punycode label rules
without IDNA 2008's context rules; `idn-hostname` and `idn-email` test letters and digits with
Python's Unicode tables; `regex` compiles the source as a translated Python regex.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Final

_F: Final = re.ASCII | re.IGNORECASE

_DATE: Final = re.compile(r"(\d\d\d\d)-(\d\d)-(\d\d)\Z", re.ASCII)
_TIME: Final = re.compile(
    r"(\d\d):(\d\d):(\d\d)(?:\.\d+)?(?:([Zz])|([+-])(\d\d):(\d\d))?\Z", re.ASCII
)
_DAYS: Final = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def is_date(value: str) -> bool:
    m = _DATE.match(value)
    if m is None:
        return False
    year, month, day = int(m[1]), int(m[2]), int(m[3])
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if not 1 <= month <= 12:
        return False
    return 1 <= day <= (29 if month == 2 and leap else _DAYS[month])


def is_time(value: str) -> bool:
    m = _TIME.match(value)
    if m is None or (not m[4] and not m[5]):
        return False
    hour, minute, second = int(m[1]), int(m[2]), int(m[3])
    if hour > 23 or minute > 59 or second > 60:
        return False
    if m[5] and (int(m[6]) > 23 or int(m[7]) > 59):
        return False
    if second < 60:
        return True
    sign = -1 if m[5] == "-" else 1
    offset = int(m[6] or 0) * 60 + int(m[7] or 0)
    return (hour * 60 + minute - sign * offset) % 1440 == 1439  # a leap second is 23:59:60 UTC


def is_date_time(value: str) -> bool:
    parts = re.split("[Tt]", value)
    return len(parts) == 2 and is_date(parts[0]) and is_time(parts[1])


_DURATION: Final = re.compile(
    r"P(?:(?:\d+Y(?:\d+M(?:\d+D)?)?|\d+M(?:\d+D)?|\d+D)"
    r"(?:T(?:\d+H(?:\d+M(?:\d+S)?)?|\d+M(?:\d+S)?|\d+S))?"
    r"|T(?:\d+H(?:\d+M(?:\d+S)?)?|\d+M(?:\d+S)?|\d+S)|\d+W)\Z",
    re.ASCII,
)

_OCTET: Final = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_IPV4: Final = rf"(?:{_OCTET}\.){{3}}{_OCTET}"
_H16: Final = r"[\da-f]{1,4}"
_LS32: Final = rf"(?:{_H16}:{_H16}|{_IPV4})"
_IPV6: Final = (
    "(?:"
    + "|".join(
        [
            rf"(?:{_H16}:){{6}}{_LS32}",
            rf"::(?:{_H16}:){{5}}{_LS32}",
            rf"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
            rf"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}",
            rf"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
            rf"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
            rf"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
            rf"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}",
            rf"(?:(?:{_H16}:){{0,6}}{_H16})?::",
        ]
    )
    + ")"
)

_PCT: Final = r"%[0-9a-f]{2}"
_PCHAR: Final = rf"(?:[-a-z0-9._~!$&'()*+,;=:@]|{_PCT})"
_PCHAR_NC: Final = rf"(?:[-a-z0-9._~!$&'()*+,;=@]|{_PCT})"  # no colon: a relative path's first
_AUTHORITY_PATH: Final = (
    rf"//(?:(?:[-a-z0-9._~!$&'()*+,;=:]|{_PCT})*@)?"
    rf"(?:\[(?:{_IPV6}|v[0-9a-f]+\.[-a-z0-9._~!$&'()*+,;=:]+)\]|{_IPV4}"
    rf"|(?:[-a-z0-9._~!$&'()*+,;=]|{_PCT})*)"
    rf"(?::\d*)?(?:/{_PCHAR}*)*"
)
_ABSOLUTE_PATH: Final = rf"/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?"
_QCHAR: Final = rf"(?:[-a-z0-9._~!$&'()*+,;=:@/?]|{_PCT})"
_TAIL: Final = rf"(?:\?{_QCHAR}*)?(?:#{_QCHAR}*)?\Z"
_SCHEME: Final = r"[a-z][a-z0-9+\-.]*:"
_URI: Final = re.compile(
    rf"{_SCHEME}(?:{_AUTHORITY_PATH}|{_ABSOLUTE_PATH}|{_PCHAR}+(?:/{_PCHAR}*)*)?{_TAIL}", _F
)
_URI_REFERENCE: Final = re.compile(
    rf"(?:{_SCHEME}(?:{_AUTHORITY_PATH}|{_ABSOLUTE_PATH}|{_PCHAR}+(?:/{_PCHAR}*)*)?"
    rf"|(?:{_AUTHORITY_PATH}|{_ABSOLUTE_PATH}|{_PCHAR_NC}+(?:/{_PCHAR}*)*)?){_TAIL}",
    _F,
)
_VARNAME: Final = r"(?:[a-z0-9_]|%[0-9a-f]{2})+(?:\.(?:[a-z0-9_]|%[0-9a-f]{2})+)*"
_VARSPEC: Final = rf"{_VARNAME}(?::[1-9]\d{{0,3}}|\*)?"
_URI_TEMPLATE: Final = re.compile(
    rf"(?:(?:[^\x00-\x20\"<>%\\^`{{|}}\x7f]|%[0-9a-f]{{2}})"
    rf"|\{{[+#./;?&=,!@|]?{_VARSPEC}(?:,{_VARSPEC})*\}})*\Z",
    _F,
)
_EMAIL: Final = re.compile(
    r"(?:[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
    r"|\"(?:[^\"\\]|\\[\x20-\x7e])*\")@"
    r"(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*"
    rf"|\[(?:IPv6:[a-f0-9:]+|{_IPV4})\])\Z",
    _F,
)
_UUID: Final = re.compile(r"[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}\Z", _F)
_JSON_POINTER: Final = re.compile(r"(?:/(?:[^~/]|~0|~1)*)*\Z")
_RELATIVE_JSON_POINTER: Final = re.compile(r"(?:0|[1-9][0-9]*)(?:#|(?:/(?:[^~/]|~0|~1)*)*)\Z")
_POINTER_FRAGMENT: Final = re.compile(
    r"#(?:/(?:[a-z0-9_\-.!$&'()*+,;:=@]|%[0-9a-f]{2}|~0|~1)*)*\Z", _F
)
_IPV4_RE: Final = re.compile(rf"{_IPV4}\Z", re.ASCII)
_IPV6_RE: Final = re.compile(rf"{_IPV6}\Z", _F)


def _matcher(pattern: re.Pattern[str]) -> Callable[[str], bool]:
    return lambda value: pattern.match(value) is not None


_LDH: Final = re.compile(r"[a-zA-Z0-9-]*\Z")


def _ascii_label(label: str) -> bool:
    return (
        not label.startswith("-")
        and not label.endswith("-")
        and label[2:4] != "--"
        and _LDH.match(label) is not None
    )


def _puny_label(label: str) -> bool:
    if label[:4].lower() != "xn--":
        return False
    body = label[4:].lower()
    if body.rfind("-") == 0:
        return False
    try:
        decoded = body.encode("ascii").decode("punycode")
    except (UnicodeError, ValueError):
        return False
    return not decoded.isascii() and _unicode_label(decoded)


def _unicode_label(label: str) -> bool:
    if not label or label[0] == "-" or label[-1] == "-" or label[2:4] == "--":
        return False
    if unicodedata.category(label[0]).startswith("M"):
        return False
    return all(
        ch == "-" or unicodedata.category(ch)[0] in "LNM" or ch in "\u00b7\u0375\u05f3\u05f4"
        for ch in label
    )


def is_hostname(value: str) -> bool:
    if not value or len(value) > 253 or value.endswith("."):
        return False
    return all(
        0 < len(label) <= 63 and (_puny_label(label) or _ascii_label(label))
        for label in value.split(".")
    )


def is_idn_hostname(value: str) -> bool:
    text = unicodedata.normalize("NFC", value)
    if not text or len(text) > 253:
        return False
    labels = re.split("[.\u3002\uff0e\uff61]", text)
    if labels[-1] == "":
        labels.pop()
    return bool(labels) and all(
        0 < len(label) <= 63
        and (_ascii_label(label) or _puny_label(label) or _unicode_label(label))
        for label in labels
    )


def is_idn_email(value: str) -> bool:
    local, at, domain = unicodedata.normalize("NFC", value).rpartition("@")
    if not at or not local or not domain:
        return False
    return is_idn_hostname(domain) and ('"' in local or all(not ch.isspace() for ch in local))


_SCHEME_START: Final = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*:", re.ASCII)
_SPECIAL: Final = frozenset({"http", "https", "ws", "wss", "ftp"})
_FORBIDDEN_HOST: Final = frozenset(" #%/:<>?@[\\]^|")


def can_parse_url(value: str, base: str | None = None) -> bool:
    """Approximate WHATWG `URL.canParse`: a scheme, and for web schemes a plausible host."""
    text = value.strip("".join(map(chr, range(0x21)))).replace("\t", "")
    text = text.replace("\n", "").replace("\r", "")
    m = _SCHEME_START.match(text)
    if m is None:
        return base is not None
    scheme = m[0][:-1].lower()
    if scheme not in _SPECIAL:
        return True
    rest = text[m.end() :].lstrip("/\\")
    host = re.split(r"[/\\?#]", rest, maxsplit=1)[0].rpartition("@")[2]
    if host.startswith("["):
        return host.endswith("]") or "]:" in host
    host = host.rsplit(":", 1)[0] if ":" in host else host
    return bool(host) and not any(ch in _FORBIDDEN_HOST for ch in host)


_BAD_IRI: Final = re.compile(r"[\x00-\x20<>^`{|}\\]|%(?![0-9a-fA-F]{2})")
_BAD_IRI_REFERENCE: Final = re.compile(r"[\x00-\x20\x7f\\]|%(?![0-9a-fA-F]{2})")
_MALFORMED_SCHEME: Final = re.compile(r"[a-zA-Z][a-zA-Z0-9+\-.]*//", re.ASCII)


def is_iri(value: str) -> bool:
    return _BAD_IRI.search(value) is None and can_parse_url(value)


def is_iri_reference(value: str) -> bool:
    return (
        _BAD_IRI_REFERENCE.search(value) is None
        and _MALFORMED_SCHEME.match(value) is None
        and can_parse_url(value, "http://example.com")
    )


def is_regex(value: str) -> bool:
    from mule.pi._schema_regex import is_js_regex

    return is_js_regex(value)


FORMATS: Final[dict[str, Callable[[str], bool]]] = {
    "date": is_date,
    "date-time": is_date_time,
    "duration": _matcher(_DURATION),
    "email": _matcher(_EMAIL),
    "hostname": is_hostname,
    "idn-email": is_idn_email,
    "idn-hostname": is_idn_hostname,
    "ipv4": _matcher(_IPV4_RE),
    "ipv6": _matcher(_IPV6_RE),
    "iri": is_iri,
    "iri-reference": is_iri_reference,
    "json-pointer": _matcher(_JSON_POINTER),
    "json-pointer-uri-fragment": _matcher(_POINTER_FRAGMENT),
    "regex": is_regex,
    "relative-json-pointer": _matcher(_RELATIVE_JSON_POINTER),
    "time": is_time,
    "uri": _matcher(_URI),
    "uri-reference": _matcher(_URI_REFERENCE),
    "uri-template": _matcher(_URI_TEMPLATE),
    "url": can_parse_url,
    "uuid": _matcher(_UUID),
}
"""Every format pi-schema checks, by name."""

__all__ = ["FORMATS", "can_parse_url"]
