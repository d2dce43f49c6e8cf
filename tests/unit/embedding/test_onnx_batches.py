"""lcg.embedding.onnx_provider.plan_batches: which texts run together in one `session.run`.

Each batch is padded to its longest text and each run has a fixed cost, so the plan must not
pad short texts to a long one's length, nor split evenly sized texts into needless runs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lcg.embedding.onnx_provider import RUN_OVERHEAD_TOKENS, plan_batches


def _cost(counts: list[int], batches: list[list[int]]) -> int:
    return sum(RUN_OVERHEAD_TOKENS + len(b) * max(counts[i] for i in b) for b in batches)


def test_an_episode_body_is_not_batched_with_entity_names() -> None:
    # What ingestion embeds at once: an episode's entity names and its text (256 tokens).
    counts = [3, 4, 5, 3, 6, 4, 3, 5, 256, 4, 3]
    batches = plan_batches(counts, cap=8)
    assert [8] in batches
    assert sorted(i for b in batches for i in b) == list(range(len(counts)))


def test_texts_of_one_length_run_in_the_fewest_batches() -> None:
    batches = plan_batches([8] * 100, cap=32)
    assert len(batches) == 4 and max(len(b) for b in batches) == 32


def test_a_jump_in_length_starts_a_new_batch() -> None:
    counts = [5] * 20 + [40] * 20
    batches = plan_batches(counts, cap=64)
    assert sorted(sorted(b) for b in batches) == [list(range(20)), list(range(20, 40))]


def test_nothing_to_embed_is_no_batch() -> None:
    assert plan_batches([], cap=8) == []


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(1, 256), max_size=150), st.integers(1, 64))
def test_every_text_once_no_batch_above_cap_and_never_dearer_than_fixed_size_batches(
    counts: list[int], cap: int
) -> None:
    batches = plan_batches(counts, cap)
    assert sorted(i for b in batches for i in b) == list(range(len(counts)))
    assert all(0 < len(b) <= cap for b in batches)
    # Each batch holds texts adjacent in token-count order.
    for b in batches:
        lengths = sorted(counts[i] for i in b)
        assert not any(lengths[0] < c < lengths[-1] for i, c in enumerate(counts) if i not in b)
    order = sorted(range(len(counts)), key=counts.__getitem__)
    fixed = [order[i : i + cap] for i in range(0, len(order), cap)]
    assert _cost(counts, batches) <= _cost(counts, fixed)
