"""Judged queries for bench/relevance.py over the Apollo corpus (examples/apollo, CC BY-SA 4.0).

Written by reading the articles, not from lcg's output. Each query names:
- `kind`: `exact` (an article's subject by name), `paraphrase` (described, not named),
  `relation` (a question whose answer is another entity), or `none` (nothing in the corpus);
- `passages`: the titles of the articles that answer it (for `knowledge_search_passages`);
- `entities`: the entities that answer it (for `knowledge_find_entities`; compared
  case-insensitively with the extracted names). One entity known under several names is one
  item, its names joined by `|` ("Jim Lovell|James Arthur Lovell Jr."): found by either.
`none` queries have neither: every result they return is noise.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["QUERIES", "Query"]


class Query(NamedTuple):
    text: str
    kind: str
    passages: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()


def _q(text: str, kind: str, passages: list[str], entities: list[str]) -> Query:
    return Query(text, kind, tuple(passages), tuple(entities))


QUERIES: list[Query] = [
    # Exact names: the article about it, and the entity itself.
    _q("Neil Armstrong", "exact", ["Neil Armstrong"], ["Neil Armstrong"]),
    _q("Buzz Aldrin", "exact", ["Buzz Aldrin"], ["Buzz Aldrin"]),
    _q("Apollo 13", "exact", ["Apollo 13"], ["Apollo 13"]),
    _q("Kennedy Space Center", "exact", ["Kennedy Space Center"], ["Kennedy Space Center"]),
    _q("Mir", "exact", ["Mir"], ["Mir"]),
    _q(
        "International Space Station",
        "exact",
        ["International Space Station"],
        ["International Space Station"],
    ),
    _q("Falcon 9", "exact", ["Falcon 9", "Falcon 9 Block 5"], ["Falcon 9"]),
    _q("Jim Lovell", "exact", ["Jim Lovell"], ["Jim Lovell|James Arthur Lovell Jr."]),
    _q("Project Gemini", "exact", ["Project Gemini"], ["Project Gemini"]),
    _q("Lunar Roving Vehicle", "exact", ["Lunar Roving Vehicle"], ["Lunar Roving Vehicle"]),
    _q("Christa McAuliffe", "exact", ["Christa McAuliffe"], ["Christa McAuliffe"]),
    _q("Deep Space Network", "exact", ["Deep Space Network"], ["Deep Space Network"]),
    _q("Eugene Cernan", "exact", ["Eugene Cernan"], ["Eugene Cernan"]),
    _q("Rocketdyne F-1", "exact", ["Rocketdyne F-1"], ["Rocketdyne F-1"]),
    _q("Peggy Whitson", "exact", ["Peggy Whitson"], ["Peggy Whitson"]),
    _q("Pioneer 10", "exact", ["Pioneer 10"], ["Pioneer 10"]),
    # Paraphrases: described, never named.
    _q("the first man on the Moon", "paraphrase", ["Neil Armstrong"], ["Neil Armstrong"]),
    _q("second person to walk on the Moon", "paraphrase", ["Buzz Aldrin"], ["Buzz Aldrin"]),
    _q(
        "teacher killed when the space shuttle exploded",
        "paraphrase",
        ["Christa McAuliffe"],
        ["Christa McAuliffe"],
    ),
    _q("the last man to walk on the Moon", "paraphrase", ["Eugene Cernan"], ["Eugene Cernan"]),
    _q(
        "first woman of Indian origin in space",
        "paraphrase",
        ["Kalpana Chawla"],
        ["Kalpana Chawla"],
    ),
    _q(
        "first African-American woman to go to space",
        "paraphrase",
        ["Mae Jemison"],
        ["Mae Jemison"],
    ),
    _q(
        "SpaceX rocket whose first stage lands and flies again",
        "paraphrase",
        ["Falcon 9", "Falcon 9 Block 5", "Falcon Heavy"],
        ["Falcon 9", "Falcon Heavy"],
    ),
    _q("Soviet space station that burned up in 2001", "paraphrase", ["Mir"], ["Mir"]),
    _q(
        "engine that pushes charged atoms out of a spacecraft",
        "paraphrase",
        ["Ion thruster"],
        ["Ion thruster"],
    ),
    _q(
        "the Moon formed when a Mars-sized planet hit the young Earth",
        "paraphrase",
        ["Giant impact hypothesis"],
        ["Giant impact hypothesis"],
    ),
    _q(
        "photo of our planet rising above the lunar horizon",
        "paraphrase",
        ["Earthrise"],
        ["Earthrise"],
    ),
    _q(
        "people who believe the Moon landings were faked",
        "paraphrase",
        ["Moon landing conspiracy theories"],
        ["Moon landing conspiracy theories"],
    ),
    _q(
        "battery-powered car the astronauts drove on the Moon",
        "paraphrase",
        ["Lunar Roving Vehicle"],
        ["Lunar Roving Vehicle"],
    ),
    _q(
        "large antennas used to talk with distant space probes",
        "paraphrase",
        ["Deep Space Network"],
        ["Deep Space Network"],
    ),
    _q(
        "Russian pioneer of the theory of spaceflight",
        "paraphrase",
        ["Konstantin Tsiolkovsky"],
        ["Konstantin Tsiolkovsky"],
    ),
    _q("Russian satellite navigation system", "paraphrase", ["GLONASS"], ["GLONASS"]),
    _q(
        "the seven original American astronauts", "paraphrase", ["Mercury Seven"], ["Mercury Seven"]
    ),
    _q(
        "astronauts read the Bible on Christmas Eve while orbiting the Moon",
        "paraphrase",
        ["Apollo 8 Genesis reading", "Apollo 8"],
        ["Apollo 8 Genesis reading", "Apollo 8"],
    ),
    _q(
        "orbit where a satellite stays above the same point of the equator",
        "paraphrase",
        ["Geostationary orbit", "Geosynchronous orbit"],
        ["Geostationary orbit", "Geosynchronous orbit"],
    ),
    _q("the only Israeli astronaut", "paraphrase", ["Ilan Ramon"], ["Ilan Ramon"]),
    _q("first rover to drive on another world", "paraphrase", ["Lunokhod 1"], ["Lunokhod 1"]),
    _q(
        "NASA mission that crashed into an asteroid to move it",
        "paraphrase",
        ["Double Asteroid Redirection Test"],
        ["Double Asteroid Redirection Test|DART"],
    ),
    _q("first successful spacecraft to fly past Mars", "paraphrase", ["Mariner 4"], ["Mariner 4"]),
    _q(
        "why the Moon looks different each night",
        "paraphrase",
        ["Phases of the Moon"],
        ["Phases of the Moon"],
    ),
    # Relation questions: the answer is another entity.
    _q("who commanded Apollo 13", "relation", ["Jim Lovell", "Apollo 13"], ["Jim Lovell"]),
    _q("who commanded Apollo 11", "relation", ["Neil Armstrong", "Apollo 11"], ["Neil Armstrong"]),
    _q(
        "command module pilot of Apollo 11 who stayed in orbit",
        "relation",
        ["Michael Collins (astronaut)", "Apollo 11"],
        ["Michael Collins"],
    ),
    _q(
        "astronauts killed in the Apollo 1 fire",
        "relation",
        ["Apollo 1", "Gus Grissom", "Edward Higgins White", "Roger B. Chaffee"],
        ["Gus Grissom", "Ed White|Edward Higgins White", "Roger Chaffee|Roger B. Chaffee"],
    ),
    _q("lunar module pilot of Apollo 13", "relation", ["Fred Haise", "Apollo 13"], ["Fred Haise"]),
    _q(
        "crew of Apollo 15",
        "relation",
        ["Apollo 15", "David Scott", "Alfred Worden", "James Irwin"],
        ["David Scott", "Alfred Worden", "James Irwin"],
    ),
    _q(
        "who walked on the Moon during Apollo 12",
        "relation",
        ["Apollo 12", "Pete Conrad", "Alan Bean"],
        ["Pete Conrad", "Alan Bean"],
    ),
    _q(
        "crew of Apollo 16",
        "relation",
        ["Apollo 16", "John W. Young", "Charles Duke", "Ken Mattingly"],
        ["John Young|John W. Young", "Charles Duke", "Ken Mattingly"],
    ),
    _q(
        "first American in space",
        "relation",
        ["Alan Shepard", "Mercury-Redstone 3"],
        ["Alan Shepard"],
    ),
    _q("first American to orbit the Earth", "relation", ["John Glenn"], ["John Glenn"]),
    _q(
        "company founded by Jeff Bezos that builds rockets",
        "relation",
        ["New Glenn", "New Shepard", "2026 New Glenn rocket explosion"],
        ["Blue Origin"],
    ),
    _q(
        "administrators of NASA",
        "relation",
        ["Bill Nelson", "Charles Bolden", "Daniel Goldin", "NASA"],
        ["Bill Nelson", "Charles Bolden", "Daniel Goldin"],
    ),
    _q(
        "engineer who argued for lunar orbit rendezvous",
        "relation",
        ["John Houbolt"],
        ["John Houbolt"],
    ),
    _q(
        "crew of Apollo 8",
        "relation",
        ["Apollo 8", "Frank Borman", "Jim Lovell"],
        ["Frank Borman", "Jim Lovell", "Bill Anders|William Anders"],
    ),
    _q(
        "engine of the first stage of the Saturn V",
        "relation",
        ["Rocketdyne F-1"],
        ["Rocketdyne F-1"],
    ),
    _q(
        "astronauts who died when Columbia broke apart in 2003",
        "relation",
        [
            "Rick Husband",
            "Kalpana Chawla",
            "Laurel Clark",
            "Ilan Ramon",
            "David M. Brown",
            "Michael P. Anderson",
        ],
        [
            "Rick Husband",
            "Kalpana Chawla",
            "Laurel Clark",
            "Ilan Ramon",
            "David Brown|David M. Brown",
            "Michael Anderson|Michael P. Anderson",
        ],
    ),
    # No answer anywhere in the corpus.
    _q("chocolate cake recipe", "none", [], []),
    _q("Premier League football results", "none", [], []),
    _q("stock market crash of 1929", "none", [], []),
    _q("how to house-train a puppy", "none", [], []),
    _q("Beethoven's ninth symphony", "none", [], []),
    _q("income tax return deadline", "none", [], []),
    _q("knitting patterns for a wool scarf", "none", [], []),
    _q("the French Revolution and the storming of the Bastille", "none", [], []),
    _q("photosynthesis in green plants", "none", [], []),
    _q("Python list comprehension syntax", "none", [], []),
    _q("best sushi restaurants in Tokyo", "none", [], []),
    _q("symptoms of the common cold", "none", [], []),
]
