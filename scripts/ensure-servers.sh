#!/usr/bin/env bash
# Make sure NATS (with JetStream) and Redis answer on their default loopback ports. When one is
# down and its server binary is installed, start it the way this kind of machine does; otherwise
# print exactly how to get it and fail.
set -uo pipefail

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
  for _ in $(seq 1 50); do port_open "$1" && return 0; sleep 0.2; done
  return 1
}


if ! port_open 4222; then
  if command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ]; then
    bin=$(command -v nats-server || echo /usr/sbin/nats-server)
    mkdir -p /var/lib/nats-server 2>/dev/null || true
    echo "== starting nats-server (JetStream) on 127.0.0.1:4222"
    if command -v start-stop-daemon >/dev/null 2>&1; then
      start-stop-daemon --start --oknodo --background --exec "$bin" -- -a 127.0.0.1 -p 4222 -js \
        -sd /var/lib/nats-server -l /var/log/nats-server.log
    else
      nohup "$bin" -a 127.0.0.1 -p 4222 -js -sd "${TMPDIR:-/tmp}/baton-nats" >/dev/null 2>&1 &
    fi
    wait_port 4222 || { echo "nats-server did not start; see /var/log/nats-server.log" >&2; exit 1; }
  else
    echo "NATS is not reachable on 127.0.0.1:4222 and nats-server is not installed." >&2
    echo "Install it (Debian: apt-get install nats-server) or set NATS_URL to a server with JetStream (-js)." >&2
    exit 1
  fi
fi

if ! port_open 6379; then
  if command -v redis-server >/dev/null 2>&1; then
    echo "== starting redis-server on 127.0.0.1:6379"
    mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
      --dir /var/lib/redis --logfile /var/log/redis/ci.log
    wait_port 6379 || { echo "redis-server did not start; see /var/log/redis/ci.log" >&2; exit 1; }
  else
    echo "Redis is not reachable on 127.0.0.1:6379 and redis-server is not installed." >&2
    echo "Install it (Debian: apt-get install redis-server) or set REDIS_URL." >&2
    exit 1
  fi
fi
echo "== NATS and Redis are up"
