"""Unicode handling shared by everything that reads or shows text: the corpus's normalisation,
applied alike to the textbooks and to every question (so a pasted full-width or ligatured word
finds the same terms as its plain form), and the escaping of what is printed to a terminal.

``normalize`` drops characters that carry no text (zero-width spaces and joiners, soft hyphens,
byte-order marks, bidirectional controls: an option cannot reverse the sentences around it), turns
control characters into spaces, then NFKC-normalises (ligatures,
full-width letters and digits, odd spaces). It is idempotent. ``printable`` makes text safe for
one line of a terminal: control characters (escape sequences, newlines) are shown as symbols.
"""

from __future__ import annotations

import re
import unicodedata

# Characters that carry no text: format characters (zero-width space/joiners, soft hyphen, BOM,
# bidi marks, embeddings, overrides and isolates) are deleted, so "Com\ufeffmunication" stays one word.
_FORMAT_CHARS = re.compile(
    r"[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]"
)
# Control characters (except whitespace ones) become a space so the words around them stay apart.
_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")
# What a terminal would act on rather than show: C0 and C1 controls (newlines and tabs too, which
# break a one-line layout), line and paragraph separators, and the bidirectional controls.
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def normalize(text: str) -> str:
    """``text`` normalised the way the corpus is: invisible characters dropped, control characters
    made spaces, NFKC applied (whitespace runs are left to the caller; private-use glyphs are kept,
    since a question's options may be written in them)."""
    text = _CONTROLS.sub(" ", _FORMAT_CHARS.sub("", text))  # first, so NFKC sees the characters that stay
    return unicodedata.normalize("NFKC", text)


def printable(text: str) -> str:
    """``text`` safe to print on one line of a terminal: each control character becomes its visible
    symbol (ESC "␛", a newline "␊", U+2400-U+2421) and other characters a terminal would act on
    (C1 controls, separators, bidirectional controls) "\ufffd", one for one, so that character
    offsets into ``text`` (highlighted spans) still hold and text from a corpus or a user can
    neither drive the terminal (set its title, clear it) nor break the layout it is printed in."""
    return _UNPRINTABLE.sub(_symbol, text)


def _symbol(match: re.Match[str]) -> str:
    code = ord(match.group())
    return chr(0x2400 + code) if code < 0x20 else "\u2421" if code == 0x7F else "\ufffd"
