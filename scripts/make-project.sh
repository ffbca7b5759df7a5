#!/usr/bin/env bash
# usage: scripts/make-project.sh <root> <name> <tag> [<tag>...]
set -euo pipefail
root=$1; name=$2; shift 2
tags=$(printf '"%s",' "$@"); tags=${tags%,}
mkdir -p "$root/src"
ptype=library; case $root in apps/*) ptype=application;; esac
cat > "$root/project.json" <<JSON
{
  "name": "$name",
  "\$schema": "../../node_modules/nx/schemas/project-schema.json",
  "sourceRoot": "$root/src",
  "projectType": "$ptype",
  "tags": [$tags],
  "targets": { "build": {}, "test": {}, "lint": {} }
}
JSON
cat > "$root/jest.config.js" <<JS
const { preset } = require('../../jest.preset');

module.exports = preset('$root', { displayName: '$name' });
JS
