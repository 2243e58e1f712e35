"""A MetaMap substitute: keep the medically meaningful words of a free-text question.

The paper queries with MetaMap's medical phrases of a case description. MetaMap is not
available here, so for questions without ``metamap_phrases`` this filter drops what MetaMap
drops most: stop words, bare numbers and measurement units, and the narrative words of exam
vignettes ("comes", "says", "noticed", ...). Its token agreement with MetaMap is measured by
``openqa filter-agreement`` (see README). Chinese questions are short and pass unchanged.
"""

from __future__ import annotations

import re

from openqa.languages import language
from openqa.text import stopwords

_WORD = re.compile(r"[A-Za-z0-9]+(?:[-'][A-Za-z0-9]+)*")

#: Units and lab abbreviations that carry no meaning without their number.
_UNITS = frozenset(
    "c f cm mm kg lb lbs oz mg g ml dl l min h hr hrs mmhg bpm beats breaths per sec mcg meq mmol "
    "mol iu u x in ft".split()
)

#: Narrative words of exam vignettes that MetaMap leaves out of its medical phrases.
_NARRATIVE = frozenset(
    """
    ago also comes came come says said within would could without noticed notices since
    complaining complains complained describes described developed develops otherwise upon
    progressively like previously remainder every however underwent become becomes became along
    throughout except around despite cannot weighs weighed many suddenly accompanied explains
    explained increasingly asked asks improve improved brought brings presents presented
    presenting reports reported states stated notes noted tells told shows showed shown reveals
    revealed appears appear appeared feels felt seems seemed thinks thought wants wanted decides
    decided returns returned visits visited begins began started starts past currently recently
    today yesterday week weeks month months year years day days hour hours minute minutes time
    times first second third next later earlier still already ever never often sometimes usually
    well much several one two three four five six seven eight nine ten best likely following
    question answer correct statement true false except which most least
    """.split()
)


_STOP = stopwords.english()
_DROP = _STOP | _UNITS | _NARRATIVE
_LOWER_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    """Lower-cased alphanumeric words (hyphenated words split), for comparing token sets."""
    return _LOWER_WORD.findall(text.lower())


def is_stopword(word: str) -> bool:
    """Whether a lower-cased word is on the English stop-word list."""
    return word in _STOP


def keep_word(word: str) -> bool:
    """Whether a question word is kept: not a stop word, unit, narrative word or bare number."""
    w = word.lower()
    return not (w in _DROP or w.replace("-", "").isdigit() or len(w) < 2)


def filter_question(text: str, lang: str = "en") -> str:
    """The medically meaningful words of ``text``, in order, joined by spaces."""
    if not language(lang).medical_filter:
        return text
    return " ".join(w for w in _WORD.findall(text) if keep_word(w))
