"""Word lists the offline extractor reads sentences with: what never names an entity, which words
are verbs, and the irregular past participles it needs to turn "we wrote X in Y" into "X written
in Y".

Data only, lowercase. `is_noise(name)` is the one test every entity name passes before it is
kept: literals (booleans, `None`, numbers, single letters), pronouns and their contractions
("I'm", "we're"), interjections and chat openers ("Glad", "Sure", "Thanks").
"""

from __future__ import annotations

import re

__all__ = [
    "DETERMINERS",
    "GENERIC_NOUNS",
    "IMPERATIVE_VERBS",
    "INTERJECTIONS",
    "NP_STOP",
    "PARTICIPLES",
    "PRONOUNS",
    "VERBS",
    "is_noise",
]

PRONOUNS = frozenset(
    """i me my mine myself you your yours yourself yourselves he him his himself she her hers
    herself it its itself we us our ours ourselves they them their theirs themselves this that
    these those i'm i've i'd i'll you're you've you'd you'll he's she's it's we're we've we'd
    we'll they're they've they'd they'll that's there's here's what's let's who's someone
    something anyone anything everyone everything nobody nothing""".split()  # noqa: SIM905 -- a word list
)
INTERJECTIONS = frozenset(
    """hi hello hey thanks thank glad sure okay ok yes no yeah yep nope wow great awesome oh ah
    please sorry cool nice perfect absolutely certainly alright hmm well welcome congrats
    congratulations indeed fine good excellent exactly right bye goodbye cheers dear""".split()  # noqa: SIM905 -- a word list
)
# Openers that make a two-word capitalised run noise too ("Glad Maya", "Thanks Tom").
_OPENERS = frozenset(
    """hi hello hey thanks thank glad sure okay ok yes yeah no wow oh sorry please welcome
    congrats absolutely certainly alright hmm""".split()  # noqa: SIM905 -- a word list
)
_LITERALS = frozenset({"true", "false", "none", "null", "nil", "undefined", "nan", "yes", "no"})
DETERMINERS = frozenset(
    {"the", "a", "an", "our", "my", "their", "its", "his", "her", "your", "this", "that"}
)
# Words that end a common-noun phrase: prepositions, conjunctions, auxiliaries, adverbs.
NP_STOP = frozenset(
    """of in on at to from by with for and or but as into onto under over about after before
    during since until than via per is are was were be been being has have had do does did will
    would can could should may might must shall now also still just then there here too very
    not no already again yet which who whom whose that when where while because so if""".split()  # noqa: SIM905 -- a word list
)
# Nouns too generic to name a thing on their own ("the company", "a copy", "the data").
GENERIC_NOUNS = frozenset(
    """company team project thing things way time data copy lot bit code issue issues problem
    problems question questions idea ideas help work job part point use end start one ones kind
    type place people person step steps example examples option options approach feature
    features function file files list value values number numbers schedule plan plans task tasks
    year years month months week weeks day days today moment while rest same other others
    information info details detail result results case cases change changes new old thanks
    sense need needs fact facts reason reasons matter matters stuff look chance couple few
    guide overview summary update updates version""".split()  # noqa: SIM905 -- a word list
)
# Verb forms (never the head of a noun phrase in the sentences the extractor reads).
VERBS = frozenset(
    """is are was were be been am has have had do does did leads led owns owned uses used runs
    ran moved moves joined joins left became becomes took takes wrote written rewritten rewrote
    ported migrated migrates switched switches transferred promoted replaced replaces renamed
    manages managed reports reported works worked lives lived located hosted hosts deployed
    based stores stored maintains maintained heads headed chairs chaired mentors mentored
    speaks spoke keeps kept integrates integrated contributes contributed ships shipped shipping
    exposes exposed visited visits met meets presented presents attended attends likes liked
    hired hires signed signs published publishes relocated relocates reviewed reviews monitored
    monitors slipped postponed delayed scheduled handed gave gives started starts stopped
    launched launches released releases added adds removed removes fixed fixes dropped drops
    requires required supports supported deprecated tracks tracked host put set pushed opened
    open-sourced sits sat belongs belonged serves served appointed named elected""".split()  # noqa: SIM905 -- a word list
)
# Imperative verbs a changelog bullet or a title may open with ("Pin Werkzeug", "Add support").
IMPERATIVE_VERBS = frozenset(
    """add adds allow bump change clarify clean deprecate disable document drop enable ensure
    expose fix handle implement improve introduce make mark move pin prevent raise refactor
    remove rename replace require restore return revert run set show simplify skip support
    switch update upgrade use warn write""".split()  # noqa: SIM905 -- a word list
)
# "we wrote X in Y" -> "X written in Y": irregular past tenses and their participles.
PARTICIPLES = {
    "wrote": "written",
    "rewrote": "rewritten",
    "ran": "run",
    "kept": "kept",
    "put": "put",
    "set": "set",
    "took": "taken",
    "gave": "given",
    "made": "made",
    "built": "built",
    "moved": "moved",
}
_NUMBERISH = re.compile(r"[\d.,:%$#+-]+[a-z]{0,2}")


def is_noise(name: str) -> bool:
    """Whether `name` is no entity: a literal, a pronoun or contraction, an interjection."""
    key = name.casefold().strip(" .,!?;:'\"()[]")
    key = key.replace("’", "'")
    if len(key) <= 1 or key in _LITERALS or _NUMBERISH.fullmatch(key):
        return True
    words = key.split()
    if not words:
        return True
    if key in PRONOUNS or (words[0] in PRONOUNS and "'" in words[0]):
        return True
    return key in INTERJECTIONS or (words[0] in _OPENERS and len(words) <= 2)
