#!/usr/bin/env bash
# Runs a command beside a throwaway PostgreSQL server and passes its libpq connection string in
# RGPU_TEST_POSTGRES. PostgreSQL refuses to run as root, so as root the server runs as `nobody`
# in a directory that user owns. Exits 77 (ctest: skipped) with the reason when the server
# cannot be started.
#   with_postgres.sh -- COMMAND ARGS...
set -uo pipefail
[ "${1:-}" = "--" ] && shift
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ -z "$pgbin" ] || [ ! -x "$pgbin/initdb" ]; then
  echo "with_postgres: SKIPPED: PostgreSQL server binaries not installed (apt-get install postgresql)"
  exit 77
fi
work=$(mktemp -d /tmp/rgpu-pg-XXXXXX)
as_owner=()
if [ "$(id -u)" = 0 ]; then
  chown nobody "$work"
  chmod 755 "$work"
  as_owner=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)
fi
pg=""
cleanup() {
  if [ -n "$pg" ]; then
    kill -INT "$pg" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$pg" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -rf "$work"
}
trap cleanup EXIT
if ! "${as_owner[@]}" "$pgbin/initdb" -D "$work/data" -U postgres --auth=trust -E UTF8 \
     >"$work/initdb.log" 2>&1; then
  echo "with_postgres: SKIPPED: initdb failed:"; cat "$work/initdb.log"
  exit 77
fi
port=$((20000 + RANDOM % 20000))
# Unix socket only (no TCP listener), in the work directory.
"${as_owner[@]}" "$pgbin/postgres" -D "$work/data" -k "$work" -p "$port" -c listen_addresses='' \
  -c fsync=on >"$work/postgres.log" 2>&1 &
pg=$!
for _ in $(seq 200); do
  "$pgbin/pg_isready" -q -h "$work" -p "$port" && break
  kill -0 "$pg" 2>/dev/null || break
  sleep 0.1
done
if ! "$pgbin/pg_isready" -q -h "$work" -p "$port"; then
  echo "with_postgres: SKIPPED: the PostgreSQL server did not start:"; cat "$work/postgres.log"
  exit 77
fi
export RGPU_TEST_POSTGRES="host=$work port=$port user=postgres dbname=postgres"
echo "with_postgres: PostgreSQL $("$pgbin/postgres" --version | awk '{print $3}') at $work:$port"
"$@"
