-- The role `tracelake sql` reads a PostgreSQL catalog as (TRACELAKE_SQL_CATALOG=postgresql://tracelake_reader@host:port/db):
-- it may SELECT the catalog's tables and nothing else, owns nothing, and cannot make large objects, so a statement
-- that got past tracelake's checker still cannot write through the catalog's session. Run as the database's owner
-- (a superuser for the REVOKEs on pg_catalog's functions) after the lake's first ingest created the catalog:
--   psql -d DB -v reader=tracelake_reader -f deploy/postgres-reader.sql
-- and give the role a password as your site does (ALTER ROLE ... PASSWORD, or a .pgpass entry).
CREATE ROLE :"reader" LOGIN NOINHERIT;
GRANT CONNECT ON DATABASE :"DBNAME" TO :"reader";
GRANT USAGE ON SCHEMA public TO :"reader";
GRANT SELECT ON ALL TABLES IN SCHEMA public TO :"reader";
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
-- Large objects need no privilege to create: take the functions that make them from everyone but their owner.
REVOKE EXECUTE ON FUNCTION lo_create(oid), lo_creat(integer), lo_import(text), lo_import(text, oid),
    lo_from_bytea(oid, bytea) FROM PUBLIC;
ALTER ROLE :"reader" SET default_transaction_read_only = on;
