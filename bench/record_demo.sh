#!/usr/bin/env bash
# Records assets/demo.sdrec from a real lab: client load, a pool of 256 PGs created (a
# peering storm), then osd.1 restarted. Run with a lab up: stormdeck lab up.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-assets/demo.sdrec}
lab=${STORMDECK_LAB_DIR:-/var/tmp/stormdeck-lab}
rm -f "$out"
.venv/bin/stormdeck record "$out" --for 170 -c "$lab/ceph.conf" &
rec=$!
sleep 15
.venv/bin/stormdeck lab load --seconds 140 --threads 16
sleep 20
.venv/bin/stormdeck lab storm --pgs 256
sleep 15
.venv/bin/stormdeck lab storm --restart-osd 1
wait "$rec"
.venv/bin/stormdeck lab load --stop || true
ls -l "$out"
