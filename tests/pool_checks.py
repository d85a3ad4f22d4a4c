"""What every multiple-choice drill item must be, whatever its kind: shared by the drill tests."""


def assert_choice_item(item: dict) -> None:
    """`shown` blocks, a weight, 3 or 4 distinct options, and a rule and reason for each wrong one only."""
    assert isinstance(item["shown"], list) and all(isinstance(b, str) and b for b in item["shown"])
    assert 0 < item["weight"] <= 1
    options = item["options"]
    assert 3 <= len(options) <= 4 and len(set(options)) == len(options)
    assert len(item["reasons"]) == len(item["rules"]) == len(options)
    for k, (reason, rule) in enumerate(zip(item["reasons"], item["rules"])):
        assert (reason == "" and rule == "") == (k == item["answer"]), item
