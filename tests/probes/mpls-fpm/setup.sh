#!/bin/bash
# Two namespaces mplsA / mplsB joined by veth vA<->vB; loopbacks, stub nets, AC and PW veths.
set -ex
for X in A B; do ip netns add mpls$X; ip -n mpls$X link set lo up; done
ip link add vA numtxqueues 2 numrxqueues 2 netns mplsA type veth peer name vB numtxqueues 2 numrxqueues 2 netns mplsB
ip -n mplsA addr add 10.0.12.1/30 dev vA; ip -n mplsA link set vA up
ip -n mplsB addr add 10.0.12.2/30 dev vB; ip -n mplsB link set vB up
ip -n mplsA addr add 10.255.0.1/32 dev lo
ip -n mplsB addr add 10.255.0.2/32 dev lo
i=1
for X in A B; do
  for pair in stub ac mpw; do
    ip -n mpls$X link add ${pair}$X type veth peer name ${pair}${X}p
    ip -n mpls$X link set ${pair}$X up; ip -n mpls$X link set ${pair}${X}p up
  done
  ip -n mpls$X addr add 10.77.$i.1/24 dev stub$X
  i=$((i+1))
  mkdir -p ${PROBE:-/tmp/mpls-probe}/run/$X
  cp "$(dirname "$0")"/conf/$X/*.conf ${PROBE:-/tmp/mpls-probe}/run/$X/
  chown -R frr:frr ${PROBE:-/tmp/mpls-probe}/run/$X; chmod 755 ${PROBE:-/tmp/mpls-probe}/run/$X
done
chmod 755 ${PROBE:-/tmp/mpls-probe} ${PROBE:-/tmp/mpls-probe}/run
