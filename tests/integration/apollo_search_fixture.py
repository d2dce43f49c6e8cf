"""A hand-made Apollo graph for search relevance tests (from ../shared/data/apollo, CC BY-SA 4.0).

Entities and facts were written by reading the Simple English Wikipedia articles on Apollo 1,
Apollo 11, Apollo 13, Apollo 17, the Apollo Lunar Module, Alan Shepard and Kennedy Space Center;
the test asserts them and checks that each query finds its expected item in the top 3.
"""

from __future__ import annotations

# (name, labels, summary)
ENTITIES: list[tuple[str, list[str], str]] = [
    (
        "Apollo program",
        ["Program"],
        "NASA project that landed the first humans on the Moon between 1969 and 1972.",
    ),
    (
        "NASA",
        ["Organization"],
        "The National Aeronautics and Space Administration, the American space agency.",
    ),
    (
        "Apollo 1",
        ["Mission"],
        "First crewed Apollo mission; a cabin fire during a launch rehearsal killed its three crew members in 1967.",
    ),
    (
        "Apollo 11",
        ["Mission"],
        "The first flight to land people on the Moon, launched on July 16, 1969.",
    ),
    (
        "Apollo 13",
        ["Mission"],
        "Seventh Apollo mission; an oxygen tank exploded on the way to the Moon and the crew returned safely.",
    ),
    ("Apollo 14", ["Mission"], "Third trip to land astronauts on the Moon, in early 1971."),
    (
        "Apollo 17",
        ["Mission"],
        "The last flight to send people to the Moon, launched in December 1972.",
    ),
    (
        "Neil Armstrong",
        ["Person", "Astronaut"],
        "American astronaut, commander of Apollo 11 and the first person to walk on the Moon.",
    ),
    (
        "Buzz Aldrin",
        ["Person", "Astronaut"],
        "Apollo 11 lunar module pilot and the second human to walk on the Moon.",
    ),
    (
        "Michael Collins",
        ["Person", "Astronaut"],
        "Apollo 11 command module pilot who stayed in lunar orbit.",
    ),
    (
        "Jim Lovell",
        ["Person", "Astronaut"],
        "Commander of Apollo 13, the mission that survived an explosion in space.",
    ),
    ("Jack Swigert", ["Person", "Astronaut"], "Command module pilot of Apollo 13."),
    ("Fred Haise", ["Person", "Astronaut"], "Lunar module pilot of Apollo 13."),
    (
        "Gus Grissom",
        ["Person", "Astronaut"],
        "Command pilot of Apollo 1, killed in the cabin fire of 1967.",
    ),
    (
        "Ed White",
        ["Person", "Astronaut"],
        "Senior pilot of Apollo 1 who died in the launch pad fire.",
    ),
    (
        "Roger Chaffee",
        ["Person", "Astronaut"],
        "Pilot of Apollo 1 who died in the launch pad fire.",
    ),
    (
        "Eugene Cernan",
        ["Person", "Astronaut"],
        "Commander of Apollo 17 and the last man to leave the lunar surface.",
    ),
    (
        "Harrison Schmitt",
        ["Person", "Astronaut"],
        "Geologist astronaut of Apollo 17 who landed on the Moon with Cernan.",
    ),
    (
        "Ronald Evans",
        ["Person", "Astronaut"],
        "Apollo 17 command module pilot who stayed in orbit around the Moon.",
    ),
    (
        "Alan Shepard",
        ["Person", "Astronaut"],
        "First American in space in 1961 and commander of Apollo 14; the oldest man to walk on the Moon.",
    ),
    ("Saturn V", ["Rocket"], "The huge rocket that launched the Apollo crews toward the Moon."),
    ("Redstone", ["Rocket"], "Rocket that powered Alan Shepard's suborbital Mercury flight."),
    (
        "Kennedy Space Center",
        ["Place"],
        "NASA spaceport on Merritt Island, Florida, the main launch site of human spaceflight.",
    ),
    ("Cape Kennedy Launch Complex 34", ["Place"], "Launch pad where the Apollo 1 fire happened."),
    (
        "Apollo Lunar Module",
        ["Spacecraft"],
        "Spidery-looking two-person lander that carried crews from lunar orbit to the surface and back.",
    ),
    ("Aquarius", ["Spacecraft"], "The Apollo 13 lunar module, used by the crew as a lifeboat."),
    (
        "Eagle",
        ["Spacecraft"],
        "The Apollo 11 lunar module that made the first manned lunar landing.",
    ),
    ("Challenger", ["Spacecraft"], "The Apollo 17 lunar module."),
    (
        "John F. Kennedy",
        ["Person"],
        "President who set the goal of landing a man on the Moon before the 1960s ended.",
    ),
    (
        "Richard Nixon",
        ["Person"],
        "President who watched the Apollo 11 launch from the White House.",
    ),
]

# (source, predicate, target, fact sentence)
FACTS: list[tuple[str, str, str, str]] = [
    ("Neil Armstrong", "COMMANDED", "Apollo 11", "Neil Armstrong commanded Apollo 11."),
    ("Buzz Aldrin", "CREW_OF", "Apollo 11", "Buzz Aldrin flew the lunar module of Apollo 11."),
    (
        "Michael Collins",
        "CREW_OF",
        "Apollo 11",
        "Michael Collins stayed in orbit around the Moon during Apollo 11.",
    ),
    (
        "Neil Armstrong",
        "WALKED_ON_MOON_WITH",
        "Buzz Aldrin",
        "Armstrong and Aldrin became the first humans to land on the Moon on July 20, 1969.",
    ),
    (
        "Saturn V",
        "LAUNCHED",
        "Apollo 11",
        "A Saturn V rocket launched Apollo 11 from the Kennedy Space Center.",
    ),
    (
        "Apollo 11",
        "LAUNCHED_FROM",
        "Kennedy Space Center",
        "Apollo 11 lifted off from Kennedy Space Center in Florida.",
    ),
    ("Eagle", "PART_OF", "Apollo 11", "The lunar module Eagle belonged to Apollo 11."),
    (
        "Richard Nixon",
        "WATCHED",
        "Apollo 11",
        "Richard Nixon watched the Apollo 11 liftoff from the White House.",
    ),
    (
        "John F. Kennedy",
        "SET_GOAL_FOR",
        "Apollo program",
        "Kennedy challenged the nation to land a man on the Moon and return him safely.",
    ),
    ("Jim Lovell", "COMMANDED", "Apollo 13", "Jim Lovell commanded Apollo 13."),
    (
        "Jack Swigert",
        "CREW_OF",
        "Apollo 13",
        "Jack Swigert was the command module pilot of Apollo 13.",
    ),
    ("Fred Haise", "CREW_OF", "Apollo 13", "Fred Haise was the lunar module pilot of Apollo 13."),
    (
        "Aquarius",
        "PART_OF",
        "Apollo 13",
        "The crew of Apollo 13 used the lunar module Aquarius as a lifeboat after the oxygen tank exploded.",
    ),
    (
        "Apollo 13",
        "PART_OF",
        "Apollo program",
        "Apollo 13 was the seventh mission of NASA's Project Apollo.",
    ),
    ("Gus Grissom", "CREW_OF", "Apollo 1", "Gus Grissom was command pilot of Apollo 1."),
    ("Ed White", "CREW_OF", "Apollo 1", "Ed White was senior pilot of Apollo 1."),
    ("Roger Chaffee", "CREW_OF", "Apollo 1", "Roger Chaffee was pilot of Apollo 1."),
    (
        "Apollo 1",
        "FIRE_AT",
        "Cape Kennedy Launch Complex 34",
        "A cabin fire during a launch rehearsal at Launch Complex 34 killed the Apollo 1 crew.",
    ),
    ("Eugene Cernan", "COMMANDED", "Apollo 17", "Eugene Cernan commanded Apollo 17."),
    (
        "Harrison Schmitt",
        "CREW_OF",
        "Apollo 17",
        "Harrison Schmitt walked on the Moon during Apollo 17.",
    ),
    (
        "Ronald Evans",
        "CREW_OF",
        "Apollo 17",
        "Ronald Evans orbited the Moon in the command module America during Apollo 17.",
    ),
    ("Challenger", "PART_OF", "Apollo 17", "Challenger was the Apollo 17 lunar module."),
    (
        "Alan Shepard",
        "COMMANDED",
        "Apollo 14",
        "Alan Shepard was spacecraft commander of Apollo 14.",
    ),
    (
        "Redstone",
        "LAUNCHED",
        "Alan Shepard",
        "A Redstone rocket carried Alan Shepard into suborbital space on May 5, 1961.",
    ),
    (
        "Kennedy Space Center",
        "OPERATED_BY",
        "NASA",
        "Kennedy Space Center is one of the ten field centers of NASA.",
    ),
    ("Apollo program", "RUN_BY", "NASA", "NASA ran the Apollo program."),
    (
        "Apollo Lunar Module",
        "USED_BY",
        "Apollo program",
        "The lunar module carried Apollo crews of two from lunar orbit to the surface.",
    ),
    (
        "Saturn V",
        "USED_BY",
        "Apollo program",
        "The Saturn V rocket launched Apollo missions to the Moon.",
    ),
    (
        "Apollo 17",
        "PART_OF",
        "Apollo program",
        "Apollo 17 was the final mission of the Apollo program.",
    ),
    (
        "Apollo 14",
        "PART_OF",
        "Apollo program",
        "Apollo 14 was the eighth crewed mission in the Apollo program.",
    ),
]

# (query, expected entity name): exact names, then paraphrases of summaries.
ENTITY_QUERIES: list[tuple[str, str]] = [
    ("Apollo 13", "Apollo 13"),
    ("Neil Armstrong", "Neil Armstrong"),
    ("Kennedy Space Center", "Kennedy Space Center"),
    ("Aquarius", "Aquarius"),
    ("Saturn V", "Saturn V"),
    ("the mission where an oxygen tank blew up", "Apollo 13"),
    ("first man who walked on the moon", "Neil Armstrong"),
    ("space agency of the United States", "NASA"),
    ("spaceport in Florida", "Kennedy Space Center"),
    ("lander carrying crews from orbit to the lunar surface", "Apollo Lunar Module"),
    ("geologist who landed on the moon", "Harrison Schmitt"),
    ("oldest man on the moon", "Alan Shepard"),
    ("fire in the cabin during a rehearsal", "Apollo 1"),
]

# (query, (source, predicate, target) of the expected fact)
FACT_QUERIES: list[tuple[str, tuple[str, str, str]]] = [
    ("who commanded Apollo 13", ("Jim Lovell", "COMMANDED", "Apollo 13")),
    ("lunar module used as a lifeboat", ("Aquarius", "PART_OF", "Apollo 13")),
    ("Nixon watched the launch from the White House", ("Richard Nixon", "WATCHED", "Apollo 11")),
    ("suborbital flight on a Redstone rocket", ("Redstone", "LAUNCHED", "Alan Shepard")),
    ("cabin fire killed the crew", ("Apollo 1", "FIRE_AT", "Cape Kennedy Launch Complex 34")),
    ("first humans to land on the Moon", ("Neil Armstrong", "WALKED_ON_MOON_WITH", "Buzz Aldrin")),
    (
        "land a man on the Moon and return him safely",
        ("John F. Kennedy", "SET_GOAL_FOR", "Apollo program"),
    ),
]
