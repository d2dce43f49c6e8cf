"""Two scripted episodes that several integration workspaces share: one in the default group
(with a new entity and a fact to an existing one), one in a second group."""

from __future__ import annotations

from lcg import Engine, Entity, Episode, EpisodeCommit, Fact
from lcg.timeutil import now

COLLINS = "11111111-1111-4111-8111-111111111111"
MOON_EPISODE = "22222222-2222-4222-8222-222222222222"
SATURN = "33333333-3333-4333-8333-333333333333"
SATURN_EPISODE = "44444444-4444-4444-8444-444444444444"
FLEW_FACT = "55555555-5555-4555-8555-555555555555"


async def commit_two_episodes(
    engine: Engine, apollo_uuid: str, saturn_labels: tuple[str, ...] = ("Entity",)
) -> None:
    """Commit the Apollo 11 moon episode (group `liminis`, Collins FLEW Apollo 11, which must
    exist as `apollo_uuid`) and the Saturn V episode (group `mission-b`)."""
    stamp = now()
    await engine.commit_episode(
        EpisodeCommit(
            group_id="liminis",
            episode=Episode(
                uuid=MOON_EPISODE,
                group_id="liminis",
                name="chunk-1",
                content="Michael Collins flew Apollo 11's command module.",
                source_description="notes/moon.md:1",
                source_file="notes/moon.md",
                chunk_id="chunk-1",
                created_at=stamp,
                valid_at=stamp,
            ),
            entities=[Entity(COLLINS, "liminis", "Michael Collins", created_at=stamp)],
            facts=[
                Fact(
                    FLEW_FACT,
                    "liminis",
                    COLLINS,
                    apollo_uuid,
                    "FLEW",
                    "Michael Collins flew Apollo 11",
                    episodes=(MOON_EPISODE,),
                    created_at=stamp,
                )
            ],
            mentions=[COLLINS, apollo_uuid],
        )
    )
    await engine.commit_episode(
        EpisodeCommit(
            group_id="mission-b",
            episode=Episode(
                uuid=SATURN_EPISODE,
                group_id="mission-b",
                name="chunk-9",
                content="The Saturn V launched Apollo 11.",
                source_description="notes/rockets.md:3",
                source_file="notes/rockets.md",
                chunk_id="chunk-9",
                created_at=stamp,
            ),
            entities=[Entity(SATURN, "mission-b", "Saturn V", saturn_labels, created_at=stamp)],
            mentions=[SATURN],
        )
    )
