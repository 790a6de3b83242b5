#!/usr/bin/env bash
# HTTP layer benchmark: osprey serve (1 I/O thread) vs nginx (1 worker) answering the same tiny JSON,
# measured with the same wrk command in the same run. Not a test: prints req/s, p99 and the ratio.
# Usage: [ROUNDS=3] Benchmarks/http/run.sh [duration, default 10s] [connections, default 64]
# The box is shared, so rounds alternate between the servers and the medians are compared.
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION=${1:-10s}
CONNECTIONS=${2:-64}
ROUNDS=${ROUNDS:-3}
OSPREY_PORT=${OSPREY_PORT:-18580}
NGINX_PORT=${NGINX_PORT:-18581}
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    if [ -f "$WORK/nginx.pid" ]; then kill "$(cat "$WORK/nginx.pid" 2>/dev/null)" 2>/dev/null || true; fi
    sleep 0.3
    rm -rf "$WORK"
}
trap cleanup EXIT

swift build -c release --product osprey >/dev/null

cat > "$WORK/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log warn;
events { worker_connections 1024; }
http {
    access_log $WORK/nginx-access.log;
    client_body_temp_path $WORK/body;
    proxy_temp_path $WORK/proxy;
    fastcgi_temp_path $WORK/fastcgi;
    uwsgi_temp_path $WORK/uwsgi;
    scgi_temp_path $WORK/scgi;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location / {
            default_type application/json;
            return 200 '{"live": true}';
        }
    }
}
CONF

# Both servers write one access line per request to a file, so logging costs the same on each side.
.build/release/osprey serve --host 127.0.0.1 --port "$OSPREY_PORT" --io-threads 1 --log-format logfmt 2>"$WORK/osprey.log" &
OSPREY_PID=$!
PIDS+=($OSPREY_PID)
nginx -c "$WORK/nginx.conf" -p "$WORK" 2>"$WORK/nginx-stderr.log" &
NGINX_MASTER=$!
PIDS+=($NGINX_MASTER)
for port in "$OSPREY_PORT" "$NGINX_PORT"; do
    for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/v2/health/live" >/dev/null && break; sleep 0.1; done
done

# CPU ticks (user+sys) used so far by a process and its children threads/workers.
cpu_ticks() {
    local total=0 pid
    for pid in "$@" $(pgrep -P "$1" 2>/dev/null || true); do
        [ -r "/proc/$pid/stat" ] || continue
        total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
    done
    echo "$total"
}

measure() { # name url pid -> prints "name req/s p99 cpu-us-per-request"
    local out before after
    before=$(cpu_ticks "$3")
    out=$(wrk -t1 -c"$CONNECTIONS" -d"$DURATION" --latency "$2")
    after=$(cpu_ticks "$3")
    local rps p99 requests
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
    requests=$(awk '/requests in/ {print $1}' <<<"$out")
    # Server CPU per request is robust to a busy shared box, unlike req/s.
    local cpu
    cpu=$(awk -v t="$((after - before))" -v hz="$(getconf CLK_TCK)" -v n="$requests" 'BEGIN { printf "%.2f", t / hz * 1e6 / n }')
    echo "$1 $rps $p99 $cpu"
    sleep 1
}

echo "wrk -t1 -c$CONNECTIONS -d$DURATION --latency http://127.0.0.1:PORT/v2/health/live  (x$ROUNDS rounds, alternating; median)"
: >"$WORK/results"
for round in $(seq "$ROUNDS"); do
    measure osprey "http://127.0.0.1:$OSPREY_PORT/v2/health/live" "$OSPREY_PID" | tee -a "$WORK/results"
    measure nginx "http://127.0.0.1:$NGINX_PORT/v2/health/live" "$NGINX_MASTER" | tee -a "$WORK/results"
done
median() { grep "^$1 " "$WORK/results" | awk -v c="$2" '{print $c}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
best() { grep "^$1 " "$WORK/results" | awk '{print $2}' | sort -n | tail -1; }
echo "columns: server req/s p99 server-cpu-us-per-request"
echo "median req/s: osprey $(median osprey 2), nginx $(median nginx 2)"
echo "best req/s:   osprey $(best osprey), nginx $(best nginx)"
echo "median CPU us/request: osprey $(median osprey 4), nginx $(median nginx 4)"
awk -v a="$(median osprey 2)" -v b="$(median nginx 2)" 'BEGIN { printf "osprey/nginx throughput ratio (median): %.2f\n", a / b }'
awk -v a="$(best osprey)" -v b="$(best nginx)" 'BEGIN { printf "osprey/nginx throughput ratio (best):   %.2f\n", a / b }'
awk -v a="$(median osprey 4)" -v b="$(median nginx 4)" 'BEGIN { printf "nginx/osprey CPU-efficiency ratio:      %.2f (>1: osprey spends less CPU per request)\n", b / a }'
