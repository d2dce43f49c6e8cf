"""What never names an entity: literals, pronouns and contractions, interjections."""

from __future__ import annotations

import pytest

from lcg.extraction.lexicon import is_noise


@pytest.mark.parametrize(
    "name",
    [
        "True",
        "False",
        "None",
        "NULL",
        "C",
        "Z",
        "42",
        "3.1",
        "I'm",
        "We're",
        "My",
        "Glad",
        "Sure",
        "Thanks Tom",
        "Welcome Ashlee",
        "it's",
        "",
    ],
)
def test_literals_pronouns_and_interjections_are_noise(name: str) -> None:
    assert is_noise(name)


@pytest.mark.parametrize(
    "name", ["NASA", "Apollo 11", "Maya Chen", "search team", "Great Valley", "Werkzeug", "Go"]
)
def test_names_and_common_noun_phrases_are_not_noise(name: str) -> None:
    assert not is_noise(name)
