"""The one read model of a recommendation (warehouse/recommendation_read.py): its field list is the contract the
docs show, the table the store writes, and the record the models build; the frame the dashboard reads and the
objects every other surface hands out come from it, row for row."""

from __future__ import annotations

import dataclasses
import json
import re
from decimal import Decimal
from pathlib import Path

from gpufinops.models.recommendation import Recommendation
from gpufinops.warehouse import db, recommendation_read, recommendation_store
from tests.feed_fleet import realistic_recommendations

ROOT = Path(__file__).resolve().parents[1]


def documented_object() -> dict:
    """The example object of docs/models.md, *The recommendation object* (the contract users read)."""
    page = (ROOT / "docs" / "models.md").read_text()
    section = page.split("## The recommendation object", 1)[1]
    block = re.search(r"```json\n(.*?)```", section, re.S)
    assert block, "docs/models.md: no JSON example under The recommendation object"
    return json.loads(block.group(1))


def test_the_fields_are_the_documented_object_s_in_its_order():
    assert list(recommendation_read.FIELDS) == list(documented_object())


def test_the_record_the_models_build_has_exactly_the_read_model_s_fields():
    assert tuple(f.name for f in dataclasses.fields(Recommendation)) == recommendation_read.FIELDS


def test_the_stored_columns_are_the_table_s_in_its_order(warehouse):
    with db.writer(warehouse) as con:
        table = [r[0] for r in con.execute("DESCRIBE recommendations").fetchall()]
    assert tuple(table) == recommendation_read.STORED_COLUMNS
    assert set(recommendation_read.INTERNAL) <= set(table)


def test_frame_and_objects_are_one_read_of_the_view(warehouse):
    recs = realistic_recommendations()
    with db.writer(warehouse) as con:
        recommendation_store.store_recommendations(con, recs, {r.kind for r in recs})
        first = recs[0].id
        recommendation_store.record_decision(con, first, "dismiss", "not ours", "lead@example.com")
        rows = recommendation_read.frame(con)
        objects = recommendation_read.load(con)
        in_run_order = recommendation_read.of_run(con, list(reversed(recs)))
    assert [o["id"] for o in objects] == rows["id"].to_list()  # largest savings first, both
    assert [o["id"] for o in in_run_order] == [r.id for r in reversed(recs)]
    for obj in objects:
        assert list(obj) == list(recommendation_read.FIELDS)
        back = Recommendation.from_object(obj)  # the inverse: the stored finding as a record
        original = next(r for r in recs if r.id == obj["id"])
        assert back.monthly_savings_usd == original.monthly_savings_usd and isinstance(
            back.monthly_savings_usd, Decimal
        )
        assert (back.current, back.proposed) == (original.current, original.proposed)
        assert set(back.evidence) == set(original.evidence)
    dismissed = next(o for o in objects if o["id"] == first)
    assert dismissed["status"] == "dismissed"
    assert dismissed["decision"]["decision"] == "dismiss" and dismissed["decision"]["actor"] == "lead@example.com"
    assert all(o["decision"] is None for o in objects if o["id"] != first)


def test_a_malformed_json_column_reads_as_an_empty_object():
    row = {name: None for name in recommendation_read.STORED_COLUMNS} | {"id": "x", "evidence": "{not json"}
    assert recommendation_read.to_object(row)["evidence"] == {}
