-- Tables: written with INSERT / UPDATE / DELETE over pgwire (port 6875) or
-- HTTP (port 6876), through group commit.

-- Items users watch, and the price they would pay.
CREATE TABLE watchlist (user_id bigint NOT NULL, item text NOT NULL, max_price integer);
