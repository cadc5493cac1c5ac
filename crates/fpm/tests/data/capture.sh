#!/bin/bash
# Records what FRR zebra (8.4, dplane_fpm_nl) sends to an FPM server. See README.md beside this file.
#   sudo ./capture.sh OUTDIR nhg|nonhg
# Everything runs in a network namespace of its own, which is deleted at the end with every daemon.
set -u
out=$(realpath -m "$1"); mode=$2
ns=fpmcap-$$
run=/tmp/$ns
mkdir -p "$out" "$run"; chown frr:frr "$run"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  sleep 1
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  ip netns del "$ns" 2>/dev/null
  rm -rf "$run"
}
trap cleanup EXIT
# Not for daemons started with &: their pid must be the daemon's own, to be killed at the end.
inns() { ip netns exec "$ns" "$@"; }

ip netns add "$ns"
inns ip link set lo up
# Two links to route over (veth pairs, both ends inside; addresses without DAD so they are usable
# at once).
for i in 0 1; do
  inns ip link add eth$i type veth peer name eth${i}p
  inns ip link set eth$i up
  inns ip link set eth${i}p up
  inns ip addr add 10.0.$i.1/24 dev eth$i
  inns ip -6 addr add 2001:db8:$i::1/64 dev eth$i nodad
done

# The FPM server stand-in: every byte of every connection, one file per connection.
ip netns exec "$ns" python3 -u - "$out/$mode" <<'PY' &
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 2620)); s.listen(1)
n = 0
while True:
    c, _ = s.accept()
    with open(f"{sys.argv[1]}.{n}.bin", "wb") as f:
        while True:
            b = c.recv(65536)
            if not b:
                break
            f.write(b); f.flush()
    n += 1
PY
pids+=($!)
sleep 1

{
  echo "hostname cap-zebra"
  echo "fpm address 127.0.0.1 port 2620"
  [ "$mode" = nonhg ] && echo "no fpm use-next-hop-groups"
} > "$run/zebra.conf"
cat > "$run/staticd.conf" <<'CONF'
hostname cap-staticd
ip route 192.0.2.0/24 10.0.0.2
ip route 198.51.100.0/24 10.0.0.2
ip route 198.51.100.0/24 10.0.1.2
ip route 203.0.113.0/25 blackhole
ip route 203.0.113.128/25 reject
ip route 100.64.0.0/16 10.0.1.2 table 1000
ipv6 route 2001:db8:100::/48 2001:db8::2
ipv6 route 2001:db8:200::/48 2001:db8::2
ipv6 route 2001:db8:200::/48 2001:db8:1::2
ipv6 route 2001:db8:300::/48 blackhole
CONF
chown frr:frr "$run"/*.conf

common=(-u frr -g frr -z "$run/zserv.api" --vty_socket "$run" -P 0)
ip netns exec "$ns" /usr/lib/frr/zebra "${common[@]}" -M dplane_fpm_nl -f "$run/zebra.conf" -i "$run/zebra.pid" \
  >"$run/zebra.log" 2>&1 &
pids+=($!)
sleep 2
ip netns exec "$ns" /usr/lib/frr/staticd "${common[@]}" -f "$run/staticd.conf" -i "$run/staticd.pid" \
  >"$run/staticd.log" 2>&1 &
pids+=($!)
sleep 4
vt() { inns vtysh --vty_socket "$run" "$@"; }
# A change (ECMP to single path: zebra sends a delete and an add) and two deletions.
vt -c 'configure terminal' -c 'no ip route 198.51.100.0/24 10.0.1.2'
sleep 1
vt -c 'configure terminal' -c 'no ip route 192.0.2.0/24 10.0.0.2' -c 'no ipv6 route 2001:db8:300::/48 blackhole'
sleep 2
vt -c 'show fpm counters' > "$out/$mode.counters.txt"
vt -c 'show ip route' -c 'show ip route table 1000' -c 'show ipv6 route' > "$out/$mode.routes.txt"
vt -c 'show nexthop-group rib' > "$out/$mode.nhg.txt"
inns ip route show table all > "$out/$mode.kernel.txt"
cat "$run/zebra.log" "$run/staticd.log" >&2
