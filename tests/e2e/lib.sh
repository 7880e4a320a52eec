# Shared by the end-to-end scripts: source it after setting $bin (the build's bin/) and $work (a
# scratch folder).

# start_server LOG [ARGS...]: starts rgpu-server (on $RGPU_BACKEND, the software GPU unless set) on
# an ephemeral loopback port
# (over $scheme, tcp unless set) with ARGS, appending its log to LOG; sets $server (its pid) and
# $url once it listens. RGPU_SERVER_ARGS adds server options, as in with_server.sh.
start_server() {
  local log=$1
  shift
  rm -f "$work/url"
  "$bin/rgpu-server" --listen "${scheme:-tcp}://127.0.0.1:0" --backend "${RGPU_BACKEND:-softgpu}" \
    --port-file "$work/url" ${RGPU_SERVER_ARGS:-} "$@" \
    2>>"$log" &
  server=$!
  for _ in $(seq 200); do [ -s "$work/url" ] && break; sleep 0.05; done
  url=$(cat "$work/url" 2>/dev/null)
}

# wait_for_text FILE TEXT: waits up to 10 s for TEXT to appear in FILE; fails if it does not.
wait_for_text() {
  for _ in $(seq 400); do grep -qs "$2" "$1" && return 0; sleep 0.025; done
  return 1
}

# hold_memory URL TENANT: runs driver_remanence as TENANT (token tok-TENANT) against URL, holding
# 32 MiB until free_memory tells it to free them; its input is fd 3, its output $work/TENANT.out,
# its pid $holder (for the caller's EXIT trap). Returns 1 if it never says it is ready. Needs
# $programs.
hold_memory() {
  mkfifo "$work/$2.in"
  "$bin/rgpu" run --server "$1" --token "tok-$2" -- "$programs/driver_remanence" write 32 \
    <"$work/$2.in" >"$work/$2.out" 2>&1 &
  holder=$!
  exec 3>"$work/$2.in"
  wait_for_text "$work/$2.out" ready
}

# free_memory TENANT: tells hold_memory's program to free its memory and exit; returns 0 once it
# exited successfully and said its free was answered.
free_memory() {
  echo free >&3
  exec 3>&-
  wait "$holder"
  local status=$?
  holder=""
  [ $status = 0 ] && grep -q freed "$work/$1.out"
}

# make_ca NAME: a self-signed CA of the test's, its key and certificate in $work/NAME.key and
# $work/NAME.pem (P-256, two days). Needs the openssl command.
make_ca() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=$1" \
    -keyout "$work/$1.key" -out "$work/$1.pem" 2>/dev/null
}

# make_server_certificate CA: a server key in $work/server.key and its certificate for
# 127.0.0.1, signed by CA (make_ca), in $work/server.pem.
make_server_certificate() {
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=server" \
    -keyout "$work/server.key" -out "$work/server.csr" 2>/dev/null &&
    printf 'subjectAltName=IP:127.0.0.1\n' >"$work/san" &&
    openssl x509 -req -in "$work/server.csr" -CA "$work/$1.pem" -CAkey "$work/$1.key" \
      -CAcreateserial -days 2 -extfile "$work/san" -out "$work/server.pem" 2>/dev/null
}
