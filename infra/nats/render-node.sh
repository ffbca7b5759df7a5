#!/bin/sh
# Render one node's nats-server configuration from node.conf.template (beside this script) on
# standard output. It holds no secret: the route secret reaches nats-server at start, through
# start-node.sh, in its environment only (infra/README.md, "Rendering a node, and the route secret").
#
#   NODE_NAME=nats-1 sh infra/nats/render-node.sh > /etc/nats/node.conf
#   NODE_NAME=nats-1 NATS_SERVER_VERSION=2.9.10 sh infra/nats/render-node.sh > /etc/nats/node.conf
#
# NODE_NAME            this node's server_name (nats-1, nats-2, nats-3): letters, digits, - and _.
# NATS_SERVER_VERSION  the nats-server release the node runs (`nats-server --version`); default
#                      2.11, production's. Below 2.10 the `sync_interval: always` line is left out
#                      (2.9 refuses the field: `unknown field "sync_interval"`) and a comment says
#                      so in its place: 2.9 fsyncs in the background about once a minute, so an
#                      acknowledged write can be lost if the machines holding it lose power or
#                      their OS crashes within that minute (a process crash or kill -9 loses nothing).
#                      Below 2.9: refused (Baton needs 2.9 or newer).
set -eu

here=$(dirname "$0")
template="$here/node.conf.template"
refuse() {
  echo "render-node.sh: $*; nothing rendered" >&2
  exit 2
}

name=${NODE_NAME:-}
[ -n "$name" ] || refuse "NODE_NAME is not set (nats-1, nats-2 or nats-3)"
case $name in *[!A-Za-z0-9_-]*) refuse "NODE_NAME '$name' may hold only letters, digits, - and _" ;; esac

version=${NATS_SERVER_VERSION:-2.11}
version=${version#v}
case $version in *[!0-9A-Za-z.-]* | [!0-9]*) refuse "NATS_SERVER_VERSION '$version' is not a version such as 2.11.4 or 2.9.10" ;; esac
case $version in *.*) ;; *) refuse "NATS_SERVER_VERSION '$version' is not a version such as 2.11.4 or 2.9.10" ;; esac
major=${version%%.*}
rest=${version#*.}
minor=${rest%%.*}
case $major in '' | *[!0-9]*) refuse "NATS_SERVER_VERSION '$version' is not a version such as 2.11.4 or 2.9.10" ;; esac
case $minor in '' | *[!0-9]*) refuse "NATS_SERVER_VERSION '$version' is not a version such as 2.11.4 or 2.9.10" ;; esac
if [ "$major" -lt 2 ] || { [ "$major" -eq 2 ] && [ "$minor" -lt 9 ]; }; then
  refuse "nats-server $version is older than 2.9, which Baton needs"
fi

[ -r "$template" ] || refuse "no $template"
grep -q '^  sync_interval: always$' "$template" || refuse "$template has no 'sync_interval: always' line"

if [ "$major" -eq 2 ] && [ "$minor" -lt 10 ]; then
  echo "render-node.sh: nats-server $version has no sync_interval: left out; acknowledged writes reach the disk within about a minute, not before the acknowledgement (infra/README.md)" >&2
  sed -e "s/\${NODE_NAME}/$name/g" \
    -e "s/^  sync_interval: always\$/  # sync_interval: always -- left out: nats-server $version refuses it (render-node.sh, NATS_SERVER_VERSION).\\
  # 2.9 fsyncs in the background about once a minute: an acknowledged write is written on a\\
  # majority of the nodes (in the OS page cache) and reaches their disks within that minute. Power\\
  # loss or an OS crash of those nodes within it can lose it; a process crash (kill -9) cannot.\\
  # Run 2.11+ in production./" \
    "$template"
else
  sed -e "s/\${NODE_NAME}/$name/g" "$template"
fi
