"""The Nexmark queries q0-q9 and q20 as SQL for Tidemark, Spark and DuckDB.

Why one text per query: every engine must answer the same question, so the
SQL is written once with `{div}` where an integer division is meant (our SQL
and DuckDB's `//` and Spark's `div` spell it differently) and rendered per
engine. Modelled on the published Nexmark SQL (Flink/RisingWave/Materialize);
where Tidemark's SQL lacks a construct the nearest faithful formulation is
used and `deviation` says what changed:

- times are `bigint` milliseconds (the Java generator's `long`): our SQL has
  no interval arithmetic, date_trunc or TUMBLE/HOP yet, so a tumbling window
  is `date_time {div} size` and a hopping window joins each bid with the
  window offsets `(VALUES (0), ..., (k))`;
- q6's "last 10 auctions per seller" is `ROW_NUMBER() ... <= 10` per seller
  (window frames other than the default, like the Flink text's `ROWS BETWEEN
  10 PRECEDING AND CURRENT ROW`, do not plan yet); q9's top-1 bid is
  `ROW_NUMBER() ... <= 1` per auction;
- a query the planner refuses fails the run (bench.nexmark.QueryNotPlanned)
  before anything is measured.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DIVISION", "QUERIES", "Query"]

# How each engine spells integer division of non-negative bigints.
DIVISION = {"tidemark": "/", "spark": "div", "duckdb": "//"}

_HOP_OFFSETS = "(VALUES (0), (1), (2), (3), (4)) AS {alias}(k)"  # 10 s windows every 2 s
_WINNING = (
    "SELECT A.id, A.seller, A.expires, max(B.price) AS final"
    " FROM auction A JOIN bid B ON A.id = B.auction"
    " WHERE B.date_time BETWEEN A.date_time AND A.expires"
    " GROUP BY A.id, A.seller, A.expires"
)


@dataclass(frozen=True)
class Query:
    name: str
    title: str
    sql: str  # SELECT ... with {div} placeholders
    deviation: str = ""

    def render(self, engine: str) -> str:
        return self.sql.format(div=DIVISION[engine])


QUERIES: tuple[Query, ...] = (
    Query("q0", "pass-through", "SELECT auction, bidder, price, date_time FROM bid"),
    Query(
        "q1",
        "currency conversion",
        "SELECT auction, bidder, 0.908 * price AS price, date_time FROM bid",
    ),
    Query("q2", "selection", "SELECT auction, price FROM bid WHERE auction % 123 = 0"),
    Query(
        "q3",
        "local item suggestion",
        "SELECT P.name, P.city, P.state, A.id"
        " FROM auction A JOIN person P ON A.seller = P.id"
        " WHERE A.category = 10 AND P.state IN ('OR', 'ID', 'CA')",
    ),
    Query(
        "q4",
        "average price per category",
        "SELECT Q.category, avg(Q.final) AS avg_final FROM ("
        "SELECT max(B.price) AS final, A.category FROM auction A JOIN bid B ON A.id = B.auction"
        " WHERE B.date_time BETWEEN A.date_time AND A.expires GROUP BY A.id, A.category"
        ") Q GROUP BY Q.category",
        "winning bid = highest bid between the auction's open and expiry, over all"
        " auctions (no 'closed by now' filter: that needs mz_now())",
    ),
    Query(
        "q5",
        "hot items (10 s windows every 2 s)",
        "SELECT AB.auction, AB.num, AB.starttime FROM ("
        "SELECT B.auction, count(*) AS num, (B.date_time {div} 2000 - O.k) * 2000 AS starttime"
        " FROM bid B CROSS JOIN " + _HOP_OFFSETS.format(alias="O") + " GROUP BY B.auction,"
        " (B.date_time {div} 2000 - O.k) * 2000) AB JOIN ("
        "SELECT max(C.num) AS maxn, C.starttime FROM ("
        "SELECT count(*) AS num, (B2.date_time {div} 2000 - O2.k) * 2000 AS starttime"
        " FROM bid B2 CROSS JOIN " + _HOP_OFFSETS.format(alias="O2") + " GROUP BY B2.auction,"
        " (B2.date_time {div} 2000 - O2.k) * 2000) C GROUP BY C.starttime) MB"
        " ON AB.starttime = MB.starttime AND AB.num >= MB.maxn",
        "HOP(10 s, 2 s) as a join with the 5 window offsets (no HOP/generate_series)",
    ),
    Query(
        "q6",
        "average selling price by seller (last 10 auctions)",
        "SELECT R.seller, avg(R.final) AS avg_final FROM ("
        "SELECT W.seller, W.final, row_number() OVER (PARTITION BY W.seller"
        " ORDER BY W.expires DESC, W.id DESC) AS rownum FROM (" + _WINNING + ") W) R"
        " WHERE R.rownum <= 10 GROUP BY R.seller",
        "the last 10 auctions per seller as `ROW_NUMBER() OVER (PARTITION BY seller ORDER"
        " BY expires DESC, id DESC) <= 10`, averaged per seller (the original CQL's one"
        " row per seller), not the Flink text's `AVG(...) OVER (... ROWS BETWEEN 10"
        " PRECEDING AND CURRENT ROW)`: only the default window frame plans; all auctions"
        " with a valid bid count as closed",
    ),
    Query(
        "q7",
        "highest bid (10 s tumbling windows)",
        "SELECT B.auction, B.price, B.bidder, B.date_time FROM bid B JOIN ("
        "SELECT max(price) AS maxprice, date_time {div} 10000 AS w FROM bid"
        " GROUP BY date_time {div} 10000) B1"
        " ON B.price = B1.maxprice AND B.date_time {div} 10000 = B1.w",
        "TUMBLE(10 s) as date_time / 10000",
    ),
    Query(
        "q8",
        "monitor new users (10 s tumbling windows)",
        "SELECT P.id, P.name, P.starttime FROM ("
        "SELECT id, name, (date_time {div} 10000) * 10000 AS starttime FROM person"
        " GROUP BY id, name, (date_time {div} 10000) * 10000) P JOIN ("
        "SELECT seller, (date_time {div} 10000) * 10000 AS starttime FROM auction"
        " GROUP BY seller, (date_time {div} 10000) * 10000) A"
        " ON P.id = A.seller AND P.starttime = A.starttime",
        "TUMBLE(10 s) as date_time / 10000",
    ),
    Query(
        "q9",
        "winning bids (top-1 bid per auction)",
        "SELECT id, item_name, seller, category, bidder, price, bid_time FROM ("
        "SELECT A.id, A.item_name, A.seller, A.category, B.bidder, B.price,"
        " B.date_time AS bid_time, row_number() OVER (PARTITION BY A.id"
        " ORDER BY B.price DESC, B.date_time ASC, B.bidder ASC) AS rownum"
        " FROM auction A JOIN bid B ON A.id = B.auction"
        " WHERE B.date_time BETWEEN A.date_time AND A.expires) T WHERE rownum <= 1",
        "ties on price broken by earliest bid, then lowest bidder",
    ),
    Query(
        "q20",
        "expand bid with auction (category 10)",
        "SELECT B.auction, B.bidder, B.price, B.channel, B.url, B.date_time AS bid_time,"
        " A.item_name, A.description, A.initial_bid, A.reserve, A.date_time AS auction_time,"
        " A.expires, A.seller, A.category"
        " FROM bid B JOIN auction A ON B.auction = A.id WHERE A.category = 10",
        "the `extra` columns are left out (empty here)",
    ),
)
