-- Materialized views: kept up to date incrementally. Each is a Dagster asset
-- whose lineage comes from this SQL.

-- Every bid with its auction (a join).
CREATE MATERIALIZED VIEW auction_bids AS
    SELECT a.id AS auction_id, a.item, b.buyer, b.amount
    FROM auctions a JOIN bids b ON b.auction_id = a.id;

-- Per item: bids, their total and the best one (an aggregate over a view).
CREATE MATERIALIZED VIEW item_stats AS
    SELECT item, count(*) AS bids, sum(amount) AS total, max(amount) AS top
    FROM auction_bids GROUP BY item;

-- Watched items with their current best bid (a table joined with a view).
CREATE MATERIALIZED VIEW watched_items AS
    SELECT w.user_id, w.item, w.max_price, s.top, s.bids
    FROM watchlist w JOIN item_stats s ON s.item = w.item;

-- How often each item with bids was looked at (a webhook joined with a view).
CREATE MATERIALIZED VIEW item_interest AS
    SELECT v.body AS item, count(*) AS views, max(s.top) AS top_bid
    FROM item_views v JOIN item_stats s ON s.item = v.body
    GROUP BY v.body;

-- Auctions opened per item, refreshed once a minute (a Dagster schedule).
CREATE MATERIALIZED VIEW auctions_per_item WITH (REFRESH EVERY '1 minute') AS
    SELECT item, count(*) AS auctions FROM auctions GROUP BY item;

-- An index: item_stats arranged by item for fast point lookups.
CREATE INDEX item_stats_by_item ON item_stats (item);
