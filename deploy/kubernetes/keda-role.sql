-- The read-only role KEDA's PostgreSQL trigger connects as (components/keda): it may count the
-- job table's rows by state and read nothing else. Run once, as the database's owner, connected
-- to svc's database (psql variables: role, password):
--   psql "$DATABASE_URL" -v role=svc_keda -v password='…' -f keda-role.sql
CREATE ROLE :"role" LOGIN PASSWORD :'password';
GRANT CONNECT ON DATABASE :"DBNAME" TO :"role";
GRANT USAGE ON SCHEMA public TO :"role";
-- Only the column the query reads: the jobs themselves (application, metadata, files, results)
-- stay out of reach.
GRANT SELECT (state, kind) ON job TO :"role";
-- A slow answer must not hold a connection: KEDA asks again at its next poll.
ALTER ROLE :"role" SET statement_timeout = '5s';
