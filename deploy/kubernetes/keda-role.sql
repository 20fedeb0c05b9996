-- The read-only role KEDA's PostgreSQL trigger connects as (components/keda): it may read the
-- job table's state counts and nothing else. Run once as the database's owner, in the svc
-- database:  psql "$DATABASE_URL" -v password="'…'" -f keda-role.sql
CREATE ROLE svc_keda LOGIN PASSWORD :password;
GRANT CONNECT ON DATABASE svc TO svc_keda;
GRANT USAGE ON SCHEMA public TO svc_keda;
-- Only the column the query reads: the jobs themselves stay out of reach.
GRANT SELECT (state) ON job TO svc_keda;
-- Keep a slow query from holding a connection (KEDA polls every 15 s).
ALTER ROLE svc_keda SET statement_timeout = '5s';
