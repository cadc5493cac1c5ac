#!/bin/bash
# fake_mpls_exec.sh CMD...  -- runs CMD in a private mount namespace where /proc/sys/net also has an
# (empty) "mpls" directory, so zebra's stat("/proc/sys/net/mpls") succeeds. The kernel still has no MPLS.
set -e
F=${PROBE:-/tmp/mpls-probe}/fakenet
mkdir -p $F/mpls
for d in /proc/sys/net/*; do b=$(basename $d); if [ -d $d ]; then mkdir -p $F/$b; mount --bind $d $F/$b; else touch $F/$b; mount --bind $d $F/$b; fi; done
mount --bind $F /proc/sys/net
exec "$@"
