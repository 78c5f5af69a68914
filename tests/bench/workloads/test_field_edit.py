"""The kv-edit workload: seeded pairs whose right decision flips, prompts that carry the field, decisions."""

from __future__ import annotations

from engine.bench.workloads.field_edit import FIELDS, decision, messages, pairs


def test_pairs_change_the_value_and_flip_the_yes_no_decisions() -> None:
    ps = pairs(21, seed=3)
    assert len(ps) == 21 and {p.field.name for p in ps} == set(FIELDS)
    assert all(p.old != p.new for p in ps)
    for p in ps:
        if p.field.name == "credits":
            assert (int(p.old) >= 50) != (int(p.new) >= 50)
        if p.field.name == "time":
            assert ("09:00" <= p.old < "17:00") != ("09:00" <= p.new < "17:00")
    assert pairs(21, seed=3) == ps and pairs(21, seed=4) != ps


def test_messages_put_the_field_before_the_context_and_the_erratum_before_the_question() -> None:
    f = FIELDS["city"]
    system, user = messages(f, "Beijing", "Follow these policies: ...", cot=True, erratum="Shanghai")
    assert system["content"].index("User's city: Beijing") < system["content"].index("Follow these policies")
    assert user["content"].startswith("Correction: the user's city is Shanghai, not Beijing.")
    assert user["content"].endswith("Think step by step first, then give the answer.")
    assert messages(f, "Beijing", "x", cot=False)[1]["content"] == f.question


def test_decision_is_the_first_option_named() -> None:
    assert decision("The city is Mumbai, not Cairo.", FIELDS["city"].options) == "Mumbai"
    assert decision("Yes, it is open.", ("yes", "no")) == "yes"
    assert decision("Nobody knows.", ("yes", "no")) == "-"  # whole words only
