"""Tokenizer-free words: the word patterns, the function-word lists and `content_words`, for the metrics and
mechanisms that compare texts word by word (the oracle, CCT per pair and its insertions, Early Answering's
truncation).

The three function-word lists differ on purpose: each is part of the definition of the scores that use it, checked
against their tests and data; on the built datasets, swapping one for another changes hundreds of oracle scores and
CCT-per-pair interventions, and some truncations.
"""

from __future__ import annotations

import re

PLAIN_WORD = re.compile(r"\d+(?:\.\d+)?|[^\W\d_]+")
"""A run of letters, or a number with an optional decimal part ("g/cm^3" is three words: "g", "cm", "3")."""

JOINED_WORD = re.compile(r"[A-Za-z0-9]+(?:[.\-/^][A-Za-z0-9]+)*")
"""Runs of letters and digits joined by . - / ^ ("0.75", "1945-46" and "g/cm^3" are one word each)."""

NUMBER = re.compile(r"[0-9]+(?:[.\-][0-9]+)*")
"""A `JOINED_WORD` that is a number or a range of numbers."""

STATEMENT_STOP_WORDS = frozenset(
    """
a an the and or but nor so yet as if then than that this these those there here it its
is are was were be been being am do does did has have had having will would can could shall should may might must
of in on at to for from by with about into onto over under between among through during before after
not no only own same too very just also both each few more most other some such any all
who whom whose which what when where why how i me my we our you your he him his she her they them their one least
""".split()
)
"""The oracle's function words, which state no fact: dropped unless written capitalised after the first word (as
in the band name "The Who"), since the oracle matches the edits' facts in the explanation."""

INTERVENTION_FUNCTION_WORDS = frozenset(
    """
a an the this that these those my your his her its our their whose which what who whom where when why how
i me you he she it we they them him us myself itself themselves one ones some any many much more most few
all each every both either neither none no nor not yes and or but if then than so as of in on at by for
with from to into onto about above below over under between among through during before after against
without within along across around near off out up down per via is am are was were be been being do does
did done have has had having will would shall should can could may might must also only very just too
there here s t let lets like unlike answer""".split()
)
"""Words that CCT never intervenes on nor counts as a fact's key: function words and auxiliaries (never an
insertion slot), plus the prompts' "answer" and the "s"/"t" that `JOINED_WORD` leaves of contractions."""

DETERMINERS_AND_PRONOUNS = frozenset(
    "the a an this that these those it its he his she her they their we our i my "
    "you your there some all each every no both".split()
)
"""Words that Early Answering's truncation never takes for the first noun, though the lexicon may list them as
nouns; any other capitalised word counts as a proper noun ("To" of "To Kill a Mockingbird" does)."""


def content_words(
    text: str,
    stop_words: frozenset[str],
    *,
    pattern: re.Pattern[str],
    keep_capitalised: bool = False,
    min_length: int = 1,
) -> list[str]:
    """The lower-cased words of `text` (matches of `pattern`) in order, without the `stop_words` and without words
    shorter than `min_length` that are not numbers; with `keep_capitalised`, a stop word written capitalised after
    the first word is kept (part of a name)."""
    found = pattern.findall(text)
    return [
        w.lower()
        for i, w in enumerate(found)
        if (w.lower() not in stop_words or (keep_capitalised and i > 0 and w[0].isupper()))
        and (len(w) >= min_length or w.isdigit())
    ]
