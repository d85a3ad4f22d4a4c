"""Reaching a decisions spot item on the page: "what is this line for" questions hold nine tenths of the
kind's weight, so a test that taps a decision line first answers those until a line to tap comes up."""
import pytest


def to_a_spot_item(gym) -> dict:
    """Answer decisions' "what for" questions rightly until a spot item is on screen; returns it."""
    for _ in range(80):
        item = gym.item("decisions")
        if "answer_line" in item:
            return item
        gym.answer("decisions")
        gym.next("decisions")
    pytest.fail("no spot item of decisions came up in eighty questions")
