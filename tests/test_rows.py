"""The per-pair score row and the package's one NaN ↔ null conversion and "n/a" number format."""

from __future__ import annotations

import json
import math

import pytest

from recoe_causaldiag.api.rows import PairScoreRow, json_number, number_from_json, without_nans
from recoe_causaldiag.report import format_number, format_p_value


def test_rows_write_nan_as_null_and_read_it_back():
    row = PairScoreRow("fc-1", "factcheck", "cc_shap", "post-hoc", 0.25, math.nan, math.nan)
    written = json.loads(json.dumps(row.to_json()))
    assert written == {
        "pair_id": "fc-1",
        "task": "factcheck",
        "metric": "cc_shap",
        "variant": "post-hoc",
        "score_faithful": 0.25,
        "score_unfaithful": None,
        "d": None,
    }
    again = PairScoreRow.from_json(written)
    assert again.to_json() == row.to_json() and math.isnan(again.d) and again.score_faithful == 0.25


def test_a_rows_cluster_is_written_only_where_the_pair_has_one_and_read_back():
    row = PairScoreRow("fc-1", "factcheck", "oracle", "binary", 1.0, 0.0, 1.0, cluster="Lou Gehrig")
    written = json.loads(json.dumps(row.to_json()))
    assert written["cluster"] == "Lou Gehrig" and PairScoreRow.from_json(written) == row
    alone = PairScoreRow("fc-2", "factcheck", "oracle", "binary", 1.0, 0.0, 1.0)
    assert "cluster" not in alone.to_json() and PairScoreRow.from_json(alone.to_json()).cluster is None


def test_rows_of_schema_1_0_results_files_still_load():
    legacy = {
        "id": "fc-1",
        "task": "factcheck",
        "metric": "random_baseline",
        "variant": "binary",
        "score_faithful": 1.0,
        "score_unfaithful": 0.0,
        "d": 1.0,
    }
    assert PairScoreRow.from_json(legacy) == PairScoreRow(
        "fc-1", "factcheck", "random_baseline", "binary", 1.0, 0.0, 1.0
    )
    with pytest.raises(KeyError):
        PairScoreRow.from_json({k: v for k, v in legacy.items() if k != "id"})


def test_one_conversion_between_nan_and_null():
    assert json_number(math.nan) is None and json_number(None) is None and json_number(2) == 2.0
    assert math.isnan(number_from_json(None)) and number_from_json(0.5) == 0.5
    assert without_nans({"a": [1.0, math.nan, (math.nan, "x")], "b": {"c": math.nan}, "n": 3}) == {
        "a": [1.0, None, [None, "x"]],
        "b": {"c": None},
        "n": 3,
    }


def test_one_number_format_for_tables():
    assert [format_number(v) for v in (0.12345, None, math.nan)] == ["0.123", "n/a", "n/a"]
    assert format_number(3.0, "g") == "3" and format_number(math.nan, "g") == "n/a"
    assert [format_p_value(v) for v in (0.0001, 0.2, None, math.nan)] == ["<0.001", "0.200", "n/a", "n/a"]
