-- Sources: where rows come from. Tidemark assigns their timestamps (the
-- timestamp-assignment sensor, or `tidemark serve`).

-- Materialize's AUCTION load generator: one new auction per second and a few
-- bids on the open ones; its tables appear as subsources beside it.
CREATE SOURCE auction FROM LOAD GENERATOR AUCTION (TICK INTERVAL '1s') FOR ALL TABLES;

-- A webhook: each POST to /api/webhook/materialize/public/item_views (port
-- 6876) is one row whose body is the name of an item someone looked at.
CREATE SOURCE item_views FROM WEBHOOK BODY FORMAT TEXT;
