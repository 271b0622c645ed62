"""Subscription rules against findings: pure matching, no database."""

from dataclasses import replace
from typing import Any

import pytest

from app.notifications.matching import (
    RULE_FIELDS,
    Finding,
    compile_silence,
    compile_subscription,
    matches,
)
from app.notifications.schemas import Rules

BERT = Finding(
    kind="regression",
    machine="h100-a",
    channel="nightly",
    suite="huggingface",
    model="BertForMaskedLM",
    category="nlp",
    config="dynamic",
    precision="amp",
    mode="training",
    metric="latency",
    direction="regression",
    rel_change=0.10,
)


def test_the_rule_fields_are_the_schemas() -> None:
    assert set(RULE_FIELDS) == set(Rules.model_fields)


def test_empty_rules_match_everything_confirmed() -> None:
    assert matches({}, [], BERT)
    assert matches({}, [], Finding(kind="machine_silent", machine="m"))


def test_suspected_steps_only_for_those_who_ask() -> None:
    early = replace(BERT, state="suspected")
    assert not matches({}, [], early)  # confirmed only, unless asked
    assert not matches({"model": "Bert*"}, [], early)
    assert matches({"state": ["suspected", "confirmed"]}, [], early)
    assert matches({"state": ["suspected", "confirmed"]}, [], BERT)
    assert not matches({"state": ["suspected"]}, [], BERT)
    assert not matches({"state": ["suspected"]}, [{"state": ["suspected"]}], early)
    assert Rules.model_validate({"state": "suspected"}).state == ["suspected"]


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        ({"model": "Bert*"}, True),
        ({"model": "bert*"}, False),  # case-sensitive
        ({"model": "*ForMasked??"}, True),
        ({"model": "Bert"}, False),  # exact without glob characters
        ({"model": "BertForMaskedLM"}, True),
        ({"model": "[AB]ert*"}, True),
        ({"model": "[!B]ert*"}, False),
        ({"model": ["resnet*", "Bert*"]}, True),  # any of a list
        ({"model": ["resnet*", "llama"]}, False),
        ({"machine": "h100-*", "channel": "nightly"}, True),
        ({"machine": "h100-*", "channel": "release"}, False),  # every field must hold
        ({"suite": "huggingface", "category": "nlp", "config": "dynamic"}, True),
        ({"precision": ["amp", "bf16"], "mode": "training", "metric": "latency"}, True),
        ({"precision": "bf16"}, False),
        ({"mode": "inference"}, False),
        ({"metric": "dynamo_peak_mem"}, False),
        ({"direction": "regression"}, True),
        ({"direction": ["improvement", "change"]}, False),
        ({"kind": "regression"}, True),
        ({"kind": ["failure", "machine_silent"]}, False),
        ({"category": "vision"}, False),
    ],
)
def test_match_rules(rules: dict[str, Any], expected: bool) -> None:
    assert matches(rules, [], BERT) is expected


@pytest.mark.parametrize(
    ("rel_change", "least", "expected"),
    [
        (0.05, 0.05, True),  # the boundary holds
        (0.0499999, 0.05, False),
        (-0.05, 0.05, True),  # absolute: a fall counts as much as a rise
        (-0.04, 0.05, False),
        (0.0, 0.0, True),
        (3.0, 0.5, True),
    ],
)
def test_min_rel_change_is_an_absolute_bound(
    rel_change: float, least: float, expected: bool
) -> None:
    finding = Finding(kind="regression", machine="m", rel_change=rel_change)
    assert matches({"min_rel_change": least}, [], finding) is expected


def test_an_exclude_rule_set_vetoes_only_when_it_holds_in_full() -> None:
    match = {"suite": "huggingface"}
    assert not matches(match, [{"model": "Bert*"}], BERT)
    assert matches(match, [{"model": "Bert*", "config": "eager"}], BERT)  # not in full
    assert not matches(match, [{"config": "eager"}, {"precision": "amp"}], BERT)  # any set
    assert matches(match, [{"config": "eager"}, {"precision": "bf16"}], BERT)
    assert not matches({}, [{"min_rel_change": 0.05}], BERT)
    assert matches({}, [{"min_rel_change": 0.5}], BERT)


def test_the_match_must_hold_before_excludes_matter() -> None:
    assert not matches({"suite": "timm"}, [{"model": "nothing"}], BERT)


def test_a_compiled_matcher_is_reusable_across_findings() -> None:
    matcher = compile_subscription({"model": ["Bert*", "llama"]}, [{"config": "eager"}])
    other = Finding(kind="regression", machine="m", model="llama", config="eager")
    third = Finding(kind="regression", machine="m", model="llama", config="dynamic")
    assert [matcher.matches(f) for f in (BERT, other, third)] == [True, False, True]


def test_glob_metacharacters_of_regular_expressions_are_literal() -> None:
    finding = Finding(kind="regression", machine="m", model="a.b+c(d)")
    assert matches({"model": "a.b+c(d)"}, [], finding)
    assert matches({"model": "a.b+c(*"}, [], finding)
    assert not matches({"model": "a?b+c(d)x*"}, [], finding)
    assert not matches({"model": "a.b+c"}, [], finding)


def test_a_project_rule_selects_that_projects_findings() -> None:
    vision = replace(BERT, project="vision")
    assert matches({"project": ["vision"]}, [], vision)
    assert not matches({"project": ["speech"]}, [], vision)
    assert not matches({}, [{"project": ["vis*"]}], vision)
    assert Rules.model_validate({"project": "vision"}).project == ["vision"]


def test_a_silence_holds_every_state() -> None:
    """Issue 26 point 11: a silence took the subscriptions' "confirmed only" default, so it
    held back the confirmed step and let the suspected one through."""
    early = replace(BERT, state="suspected")
    assert compile_silence({}).matches(early)
    assert compile_silence({"model": "Bert*"}).matches(early)
    assert compile_silence({"model": "Bert*"}).matches(BERT)
    assert not compile_silence({"state": ["confirmed"]}).matches(early)
    assert not compile_silence({"model": "resnet*"}).matches(early)
