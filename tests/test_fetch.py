import duckdb
import pytest

from gpufinops.warehouse.fetch import one, scalar


def test_scalar_and_one_read_the_row_and_refuse_none():
    con = duckdb.connect()
    assert scalar(con.execute("SELECT count(*) FROM range(3)")) == 3
    assert one(con.execute("SELECT 1, 'a'")) == (1, "a")
    with pytest.raises(LookupError, match="the spend total returned no row"):
        one(con.execute("SELECT 1 WHERE false"), "the spend total")


def test_one_refuses_more_than_one_row_and_leaves_the_connection_usable():
    con = duckdb.connect()
    with pytest.raises(LookupError, match="returned 3 rows, expected one"):
        one(con.execute("SELECT * FROM range(3)"))
    assert scalar(con.execute("SELECT 42")) == 42
    assert scalar(con.execute("SELECT 43")) == 43
