#!/bin/sh
# Start one node of the cluster: the guard every node starts through (infra/README.md, "Rendering a
# node, and the route secret"). It checks the route secret, puts the routes with their credentials
# into nats-server's environment (never into a file) and execs nats-server on the rendered file:
#
#   NATS_ROUTE_PASSWORD=<secret> exec sh infra/nats/start-node.sh /etc/nats/node.conf
#   NATS_ROUTE_PASSWORD=<secret> sh infra/nats/start-node.sh /etc/nats/node.conf -t   # check the file
#
# NATS_ROUTE_PASSWORD  the cluster's route secret, the same on every node: at least 32 characters
#                      of A-Z a-z 0-9 . _ ~ - (it goes into URLs as it is): `openssl rand -hex 32`.
#                      Unset, empty, shorter or with other characters: refused, nothing started.
# NATS_ROUTE_HOSTS     the nodes' route listeners, host:port, separated by spaces or commas;
#                      default "nats-1:6222 nats-2:6222 nats-3:6222" (a node skips its own).
# Anything after the configuration file is passed to nats-server (-t checks the file and exits).
#
# nats-server 2.9 to 2.14 present a route's credentials only from the route URL's user info, so
# each route is nats-route://route:<secret>@<host:port>. They reach the configuration as
# $NATS_ROUTE_URLS (an array) and the secret as $NATS_ROUTE_PASSWORD_VALUE (a quoted string, so
# that a secret such as 0123... is not read as a number): environment variables of the server
# process, readable by its user and root only (/proc/<pid>/environ), like NATS_ROUTE_PASSWORD
# itself. nats-server logs and /varz show the route hosts, never the secret.
set -eu

refuse() {
  echo "start-node.sh: $*; nats-server not started" >&2
  exit 2
}

[ $# -ge 1 ] || refuse "usage: start-node.sh <node.conf> [nats-server options]"
conf=$1
shift
[ -r "$conf" ] || refuse "cannot read $conf"

secret=${NATS_ROUTE_PASSWORD:-}
[ -n "$secret" ] || refuse "NATS_ROUTE_PASSWORD is unset or empty: set it to the cluster's route secret (openssl rand -hex 32), the same on every node"
case $secret in
  *[!A-Za-z0-9._~-]*) refuse "NATS_ROUTE_PASSWORD may hold only A-Z a-z 0-9 . _ ~ - (it goes into the route URLs): openssl rand -hex 32" ;;
esac
[ ${#secret} -ge 32 ] || refuse "NATS_ROUTE_PASSWORD is ${#secret} characters long, fewer than 32: openssl rand -hex 32"

hosts=$(printf '%s' "${NATS_ROUTE_HOSTS:-nats-1:6222 nats-2:6222 nats-3:6222}" | tr ',' ' ')
urls=
set -f
for host in $hosts; do
  case $host in
    *[!A-Za-z0-9.:_-]* | :* | *:) refuse "NATS_ROUTE_HOSTS: '$host' is not host:port" ;;
    *:*) ;;
    *) refuse "NATS_ROUTE_HOSTS: '$host' has no port (host:port)" ;;
  esac
  urls="${urls:+$urls, }\"nats-route://route:$secret@$host\""
done
set +f
[ -n "$urls" ] || refuse "NATS_ROUTE_HOSTS names no node"

NATS_ROUTE_URLS="[$urls]"
NATS_ROUTE_PASSWORD_VALUE="\"$secret\""
export NATS_ROUTE_URLS NATS_ROUTE_PASSWORD_VALUE
exec nats-server -c "$conf" "$@"
