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
