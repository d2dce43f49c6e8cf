"""What counts as a standing instruction or a stated preference (lcg.search.standing)."""

from __future__ import annotations

import pytest

from lcg.search.standing import INSTRUCTION, PREFERENCE, kind, where


@pytest.mark.parametrize(
    "text",
    [
        "Always include version numbers when I ask about libraries.",
        "Thanks. Never suggest paid tools in your answers!",
        "please always answer in French",
        "From now on, keep replies under ten lines.",
        "That works.\nWhenever I ask for a date, use the ISO format.",
        "Don't ever rename my variables.",
    ],
)
def test_an_imperative_that_opens_a_sentence_is_an_instruction(text: str) -> None:
    assert kind(text) == INSTRUCTION


@pytest.mark.parametrize(
    "text",
    [
        "I prefer step-by-step explanations with examples.",
        "For the budget I'd rather use Excel than an app.",
        "My preference is a quiet desk on the second floor.",
    ],
)
def test_a_first_person_preference_is_a_preference(text: str) -> None:
    assert kind(text) == PREFERENCE


def test_both_marks_can_hold_at_once() -> None:
    assert kind("I prefer short answers. Always cite the source.") == INSTRUCTION | PREFERENCE


@pytest.mark.parametrize(
    "text",
    [
        "I always forget the meeting on Mondays.",  # a habit, not an instruction
        "You should always validate user input.",  # advice inside a sentence
        "The build is never green on Fridays.",
        "She prefers tea.",  # not the writer's own preference
        "",
    ],
)
def test_other_uses_of_the_words_are_not_marked(text: str) -> None:
    assert kind(text) == 0


def test_where_is_the_start_of_the_sentence_that_holds_the_first_mark() -> None:
    text = "Thanks for the help. Then I prefer tea over coffee. Never book before noon."
    assert text[where(text) or 0 :].startswith("Then I prefer tea")
    rule = "Ok!\nPlease always answer in French."
    assert rule[where(rule) or 0 :] == "Please always answer in French."
    assert where("Always cite sources.") == 0
    assert where("Nothing to keep here.") is None
