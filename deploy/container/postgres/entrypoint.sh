#!/bin/sh
# The official postgres image's first start, in short: an empty PGDATA gets a cluster whose
# superuser is POSTGRES_USER with POSTGRES_PASSWORD (SCRAM over TCP) and a database
# POSTGRES_DB; then the server runs in the foreground (PID 1: SIGINT is a fast shutdown).
# POSTGRES_LISTEN: listen_addresses (default '*').
set -eu
: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is required}"
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
    initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" --auth-local=trust \
        --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    if [ "$db" != postgres ]; then
        createdb -U "$user" "$db"
    fi
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
    echo "initialised $PGDATA: user $user, database $db"
fi
exec postgres -D "$PGDATA" -c "listen_addresses=${POSTGRES_LISTEN:-*}"
