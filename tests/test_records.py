import dataclasses

import pytest

from recoe_causaldiag.api.records import FEATURES, PairRecord, RecordError, Rewrite, validate_record, validate_records


def make(**changes) -> PairRecord:
    base = PairRecord(
        id="factcheck-default-0",
        task="factcheck",
        question="Does Satchel Paige professionally play baseball?",
        choices=("Yes", "No"),
        answer="No",
        edits=("Satchel Paige professionally plays the sport hurling.",),
        counter_edits=("Satchel Paige professionally plays the sport rugby.",),
        explanation_faithful="Satchel Paige professionally plays the sport hurling, not baseball.",
        explanation_unfaithful="Satchel Paige professionally plays the sport rugby, not baseball.",
        rewrites=(
            Rewrite(
                "{} professionally plays the sport", "Satchel Paige", "hurling", "baseball", ("The sport {} plays is",)
            ),
        ),
        metadata='{"relation": "sport"}',
    )
    return dataclasses.replace(base, **changes)


def test_features_cover_every_field():
    assert list(FEATURES) == [f.name for f in dataclasses.fields(PairRecord)]


def test_row_round_trip():
    record = make()
    assert PairRecord.from_row(record.to_row()) == record


def test_a_row_written_before_paraphrases_existed_reads_with_none():
    row = make().to_row()
    assert row["rewrites"][0]["paraphrases"] == ["The sport {} plays is"]
    del row["rewrites"][0]["paraphrases"]
    assert PairRecord.from_row(row).rewrites[0].paraphrases == ()


@pytest.mark.parametrize(
    "paraphrases, problem",
    [
        (("The sport plays is",), "needs one '{}'"),
        (("{} professionally plays the sport",), "repeats the prompt"),
    ],
)
def test_a_rewrite_paraphrase_is_checked(paraphrases, problem):
    bad = dataclasses.replace(make().rewrites[0], paraphrases=paraphrases)
    with pytest.raises(RecordError, match=problem) as err:
        validate_record(make(rewrites=(bad,)))
    assert err.value.field_name == "rewrites[0]"


def test_record_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        make().answer = "Yes"


@pytest.mark.parametrize(
    "changes, field_name",
    [
        ({"answer": "Maybe"}, "answer"),
        (
            {"explanation_unfaithful": "Satchel Paige professionally plays the sport hurling, not baseball."},
            "explanation_unfaithful",
        ),
        ({"counter_edits": ("Satchel Paige professionally plays the sport hurling.",)}, "counter_edits"),
        ({"edits": ()}, "edits"),
        ({"task": "factchek"}, "task"),
        ({"question": " "}, "question"),
        ({"choices": ("Yes", "Yes")}, "choices"),
        ({"metadata": "{not json"}, "metadata"),
    ],
)
def test_validation_names_row_and_field(changes, field_name):
    with pytest.raises(RecordError) as err:
        validate_record(make(**changes))
    assert err.value.field_name == field_name
    assert "factcheck-default-0" in str(err.value) and field_name in str(err.value)


def test_repeated_id_is_rejected():
    with pytest.raises(RecordError, match="repeats"):
        validate_records([make(), make()])


def test_recoe_task_names_are_valid():
    validate_record(make(task="recoe/comparative"))
    with pytest.raises(RecordError):
        validate_record(make(task="recoe/nonsense"))
