"""Text helpers for listings."""

import re

_NOT_SLUG = re.compile(r"[^a-z0-9]+")


def slug(text: str) -> str:
    return _NOT_SLUG.sub("-", text.lower()).strip("-")


def shorten(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
