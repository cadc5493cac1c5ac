#!/bin/bash
# start.sh X daemon [extra args]   -- starts one FRR daemon in namespace mplsX, the project's way
X=$1; D=$2; shift 2
R=${PROBE:-/tmp/mpls-probe}/run/$X
ARGS=(-u frr -g frr -i $R/$D.pid -z $R/zserv.api --vty_socket $R -f $R/$D.conf -P 0 --log file:$R/$D.log --log-level debug)
[ $D = zebra ] && ARGS+=(-s 16777216)
[ $D = ldpd ] && ARGS+=(--ctl_socket $R)
nohup ip netns exec mpls$X $WRAP /usr/lib/frr/$D "${ARGS[@]}" "$@" > $R/$D.out 2>&1 &
echo $! > $R/$D.launcher
