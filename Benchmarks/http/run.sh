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
    [ -f "$WORK/nginx.pid" ] && kill "$(cat "$WORK/nginx.pid")" 2>/dev/null || true
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
PIDS+=($!)
nginx -c "$WORK/nginx.conf" -p "$WORK" 2>"$WORK/nginx-stderr.log" &
PIDS+=($!)
for port in "$OSPREY_PORT" "$NGINX_PORT"; do
    for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/v2/health/live" >/dev/null && break; sleep 0.1; done
done

measure() { # name url -> prints "name req/s p99"
    local out
    out=$(wrk -t1 -c"$CONNECTIONS" -d"$DURATION" --latency "$2")
    local rps p99
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
    echo "$1 $rps $p99"
    sleep 1
}

echo "wrk -t1 -c$CONNECTIONS -d$DURATION --latency http://127.0.0.1:PORT/v2/health/live  (x$ROUNDS rounds, alternating; median)"
: >"$WORK/results"
for round in $(seq "$ROUNDS"); do
    measure osprey "http://127.0.0.1:$OSPREY_PORT/v2/health/live" | tee -a "$WORK/results"
    measure nginx "http://127.0.0.1:$NGINX_PORT/v2/health/live" | tee -a "$WORK/results"
done
median() { grep "^$1 " "$WORK/results" | awk '{print $2}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
OSPREY_RPS=$(median osprey)
NGINX_RPS=$(median nginx)
echo "median req/s: osprey $OSPREY_RPS, nginx $NGINX_RPS"
awk -v a="$OSPREY_RPS" -v b="$NGINX_RPS" 'BEGIN { printf "osprey/nginx throughput ratio: %.2f\n", a / b }'
