#!/bin/bash
# Live check: real zebra 8.4 against our FPM server (examples/fpm_listen), with a reconnect.
#   cargo build -p fpm --example fpm_listen
#   sudo ./live.sh target/debug/examples/fpm_listen OUTFILE
# In a namespace of its own, deleted at the end with every daemon it started. See README.md.
set -u
bin=$1; out=$2
ns=fpmlive-$$; run=/tmp/$ns
mkdir -p "$run"; chown frr:frr "$run"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  sleep 1
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  ip netns del "$ns" 2>/dev/null; rm -rf "$run"
}
trap cleanup EXIT
inns() { ip netns exec "$ns" "$@"; }
ip netns add "$ns"; inns ip link set lo up
for i in 0 1; do
  inns ip link add eth$i type veth peer name eth${i}p
  inns ip link set eth$i up; inns ip link set eth${i}p up
  inns ip addr add 10.0.$i.1/24 dev eth$i
done
ip netns exec "$ns" "$bin" 127.0.0.1:2620 1000 > "$out" 2>&1 &
pids+=($!)
sleep 1
printf 'hostname z\nfpm address 127.0.0.1 port 2620\n' > "$run/zebra.conf"
printf 'hostname s\nip route 192.0.2.0/24 10.0.0.2\nip route 198.51.100.0/24 10.0.0.2\nip route 198.51.100.0/24 10.0.1.2\nip route 203.0.113.0/24 blackhole\n' > "$run/staticd.conf"
chown frr:frr "$run"/*.conf
common=(-u frr -g frr -z "$run/zserv.api" --vty_socket "$run" -P 0)
ip netns exec "$ns" /usr/lib/frr/zebra "${common[@]}" -M dplane_fpm_nl -f "$run/zebra.conf" -i "$run/zebra.pid" >/dev/null 2>&1 &
pids+=($!)
sleep 2
ip netns exec "$ns" /usr/lib/frr/staticd "${common[@]}" -f "$run/staticd.conf" -i "$run/staticd.pid" >/dev/null 2>&1 &
pids+=($!)
sleep 4
vt() { inns vtysh --vty_socket "$run" "$@"; }
echo "=== disconnect FPM, delete 192.0.2.0/24 while disconnected, reconnect" >> "$out"
vt -c 'configure terminal' -c 'no fpm address'
sleep 2
vt -c 'configure terminal' -c 'no ip route 192.0.2.0/24 10.0.0.2'
sleep 1
vt -c 'configure terminal' -c 'fpm address 127.0.0.1 port 2620'
sleep 6
vt -c 'show fpm counters' >> "$out"
