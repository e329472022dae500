#!/usr/bin/env bash
# Installs the Debian packages the local stack needs, idempotently: Postgres 15, ClickHouse
# (server and client), wrk for load benchmarks, HAProxy as the end-to-end run's front door,
# ZooKeeper for the replicated ClickHouse test (it starts its own on loopback). Packages that would start their own service
# are installed behind a policy-rc.d that forbids it (the stack runs its own servers on free
# loopback ports with project-local data dirs).
set -euo pipefail

# containerd, runc, the CNI plugins, iptables and conntrack run the local cluster (make cluster,
# make e2e); haproxy is the reverse proxy `make e2e` puts in front of the api Service.
want=(postgresql-15 postgresql-client-15 clickhouse-server clickhouse-client wrk chromium
  containerd runc containernetworking-plugins iptables conntrack haproxy zookeeperd)
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
  echo "deps: missing packages ${missing[*]}; run as root or install them" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}" >&2
policy=/usr/sbin/policy-rc.d
had_policy=0; [ -e "$policy" ] && had_policy=1
if [ $had_policy = 0 ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy"
fi
trap '[ $had_policy = 0 ] && rm -f "$policy"' EXIT
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The packaged services must not hold the default ports.
for svc in clickhouse-server postgresql containerd haproxy zookeeper; do
  (command -v systemctl >/dev/null && systemctl disable --now "$svc" >/dev/null 2>&1) || true
  service "$svc" stop >/dev/null 2>&1 || true
done
