#!/usr/bin/env bash
# slurm/multinode.sh -- a K-node SLURM cluster on one machine, one network namespace per node.
# Normally reached through slurm/local_cluster.sh (up --nodes K, down, mstatus, exec); it runs beside
# the single-node cluster of local_cluster.sh and shares nothing with it but munged.
#
#   up --nodes K --ranks-per-node R [--inter RATE|none] [--intra RATE|none]
#   down [--purge]      kill our daemons, delete our namespaces, hosts files and blackhole route
#                       (also after a crash: works from the namespace list and pid files); --purge
#                       also deletes the state dir (accounting DB, logs)
#   status              daemons and `sinfo` (run inside node 0); exit 0 only if every node is usable
#   exec [--node K] CMD run CMD inside node K's namespace with SLURM_CONF set (SLURM clients, sweeps)
#
# Two tiers (shared/reference/multi-node-slurm.md): ranks on one node talk over that node's loopback
# (the NVLink tier; --intra shapes it, default none); between nodes over veths on a bridge, shaped with
# tbf at both ends (the InfiniBand tier; --inter, default 1gbit). Addresses: SUBNET.(k+1)/24, only
# inside our namespaces; the root namespace gets a blackhole route for SUBNET, so nothing addressed
# to it can leave the machine. Every daemon of this cluster runs inside a node namespace:
# slurmctld, slurmdbd and a private MariaDB in n0's (on n0's own loopback), slurmd -N nK in nK's.
# Knobs: SLURM_MULTI_DIR (/tmp/slurm-multi), SLURM_MULTI_SUBNET (10.78.0), SLURM_MULTI_CLUSTER
# (dspmulti), SLURM_MULTI_PARTITION (debug).
set -Eeuo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=local_cluster.sh
source "$HERE/local_cluster.sh"      # say, die, alive_pid, wait_for, stop_daemons, start_munge, install

PFX=dspmn-                           # not bench/netns.py's dspb-: its teardown must never reach us
BR_NS=${PFX}br
MSTATE=${SLURM_MULTI_DIR:-/tmp/slurm-multi}
SUBNET=${SLURM_MULTI_SUBNET:-10.78.0}
MCLUSTER=${SLURM_MULTI_CLUSTER:-dspmulti}
MPART=${SLURM_MULTI_PARTITION:-debug}
MCONF=$MSTATE/etc/slurm.conf
MRUN=$MSTATE/run
MLOGS=$MSTATE/log
MDB=$MSTATE/mysql
MDB_SOCK=$MDB/run/mysqld.sock
MDB_PID=$MDB/run/mysqld.pid
SPEC=$MSTATE/cluster.spec            # "K R inter intra" of the running cluster
MUNGE_MARK=$MRUN/munged.started-by-us
CTLD_PORT=6917 SLURMD_PORT=6918 DBD_PORT=6919 MDB_PORT=3317
export SLURM_CONF=$MCONF              # every SLURM command below, and slurmdbd's slurmdbd.conf lookup

ns_of() { echo "${PFX}n$1"; }
addr_of() { echo "$SUBNET.$(($1 + 1))"; }
our_namespaces() { ip netns list 2>/dev/null | awk -v p="$PFX" 'index($1, p) == 1 {print $1}'; }
nodes_up() { [[ -r $SPEC ]] && awk '{print $1}' "$SPEC" || echo 0; }

# in_node K CMD...: CMD in node K's network namespace, its own UTS (hostname nK) and mount namespace
# (the node's hosts file bound on /etc/hosts). nsenter, not `ip netns exec`, which remounts /sys and
# leaves slurmd with "No filesystem mounted on /sys/fs/cgroup".
in_node() {
    local k=$1
    shift
    nsenter --net="/run/netns/$(ns_of "$k")" unshare --uts --mount sh -c \
        "hostname n$k && mount --bind /etc/netns/$(ns_of "$k")/hosts /etc/hosts && exec \"\$@\"" sh "$@"
}
# a SLURM client in node 0 (ip netns exec also binds the node's hosts file)
client() { ip netns exec "$(ns_of 0)" env SLURM_CONF="$MCONF" "$@"; }
netx() { ip netns exec "$1" "${@:2}"; }

netns_why_not() {
    [[ -z ${DSPBENCH_NO_NETNS:-} ]] || { echo "DSPBENCH_NO_NETNS is set (simulated: no network namespaces)"; return; }
    [[ $EUID -eq 0 ]] || { echo "not root (ip netns and tc need CAP_NET_ADMIN)"; return; }
    command -v ip >/dev/null || { echo "the ip command (iproute2) is not installed"; return; }
    local p=${PFX}probe$$ err
    err=$(ip netns add "$p" 2>&1) || { echo "ip netns add failed: $err"; return; }
    err=$({ netx "$p" ip link add pa type veth peer name pb && netx "$p" tc qdisc add dev pa root tbf \
        rate 1gbit burst 125000 limit 4mb; } 2>&1) || echo "veth + tbf in a namespace failed: $err"
    ip netns del "$p" 2>/dev/null || true
}

# ------------------------------------------------------------------ network
tbf() { # DEV RATE NS: one shaped direction; burst max(2 frames, 1 ms at the rate), no segmentation offload
    local bits
    bits=$(awk -v r="$2" 'BEGIN{n=r+0; u=tolower(r); m=u~/gbit$/?1e9:u~/mbit$/?1e6:u~/kbit$/?1e3:1;
        printf "%d", n*m}')
    local burst=$((bits / 8000 > 3028 ? bits / 8000 : 3028))
    netx "$3" ip link set dev "$1" gso_max_size 1514 gso_max_segs 1
    netx "$3" tc qdisc add dev "$1" root tbf rate "$2" burst "$burst" limit 4mb
}

make_network() { # K INTER INTRA
    local k n=$1 inter=$2 intra=$3 ns hosts
    ip route add blackhole "$SUBNET.0/24" 2>/dev/null || true
    # `ip route get` answers "blackhole ..." or (this kernel) EINVAL for a blackholed address; never a " dev "
    local got
    got=$(ip route get "$(addr_of 0)" 2>&1 || true)
    [[ $(ip route show exact "$SUBNET.0/24") == blackhole* && $got != *" dev "* ]] ||
        die "the blackhole route for $SUBNET.0/24 is not in effect (ip route get: $got)"
    ip netns add "$BR_NS"
    netx "$BR_NS" ip link add br0 type bridge
    netx "$BR_NS" ip link set br0 up
    hosts=$(printf '127.0.0.1 localhost\n'; for ((k = 0; k < n; k++)); do echo "$(addr_of $k) n$k"; done)
    for ((k = 0; k < n; k++)); do
        ns=$(ns_of $k)
        ip netns add "$ns"
        netx "$ns" ip link add eth0 type veth peer name "p$k" netns "$BR_NS"
        netx "$BR_NS" ip link set "p$k" master br0 up
        netx "$ns" ip addr add "$(addr_of $k)/24" dev eth0
        netx "$ns" ip link set eth0 up
        netx "$ns" ip link set lo up
        if [[ $inter != none ]]; then tbf eth0 "$inter" "$ns"; tbf "p$k" "$inter" "$BR_NS"; fi
        # the intra tier: loopback carries traffic between ranks of one node (also to the node's own address)
        if [[ $intra != none ]]; then netx "$ns" ip link set lo mtu 1500; tbf lo "$intra" "$ns"; fi
        # new namespaces inherit BBR and refuse a sysctl change: cubic per route instead
        netx "$ns" ip route replace "$SUBNET.0/24" dev eth0 congctl cubic || true
        netx "$ns" sysctl -qw net.ipv4.tcp_slow_start_after_idle=0 || true
        mkdir -p "/etc/netns/$ns"
        echo "$hosts" >"/etc/netns/$ns/hosts"
    done
}

# ------------------------------------------------------------------ configs
write_mconfigs() { # K R
    local n=$1 r=$2 k nodes
    mkdir -p "$MSTATE/etc" "$MRUN" "$MLOGS" "$MSTATE/ctld" "$MSTATE/spool"
    nodes=$(for ((k = 0; k < n; k++)); do printf 'n%d,' $k; done)
    {
        cat <<EOF
# Written by dspbench slurm/multinode.sh -- $n-node test cluster in network namespaces. Rerun the script.
ClusterName=$MCLUSTER
SlurmctldHost=n0($(addr_of 0))
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
StateSaveLocation=$MSTATE/ctld
SlurmdSpoolDir=$MSTATE/spool/%n
SlurmctldPidFile=$MRUN/slurmctld.pid
SlurmdPidFile=$MRUN/slurmd-%n.pid
SlurmctldLogFile=$MLOGS/slurmctld.log
SlurmdLogFile=$MLOGS/slurmd-%n.log
$(policy_conf)
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
Include $MSTATE/ctld/jobid.conf
EOF
        for ((k = 0; k < n; k++)); do
            echo "NodeName=n$k NodeAddr=$(addr_of $k) CPUs=$r RealMemory=1024 State=UNKNOWN"
        done
        echo "PartitionName=$MPART Nodes=${nodes%,} Default=YES MaxTime=7-00:00:00 State=UP"
    } >"$MCONF"
    # included by slurm.conf: FirstJobId is written at each slurmctld start (clients need the file before)
    [[ -s $MSTATE/ctld/jobid.conf ]] || echo '# FirstJobId: see start_mdaemons' >"$MSTATE/ctld/jobid.conf"
    (umask 077 && cat >"$MSTATE/etc/slurmdbd.conf") <<EOF
AuthType=auth/munge
DbdHost=localhost
DbdPort=$DBD_PORT
SlurmUser=root
LogFile=$MLOGS/slurmdbd.log
PidFile=$MRUN/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$MDB_PORT
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
EOF
}

# ------------------------------------------------------------------ daemons (all in node namespaces)
mdb_ping() { mariadb-admin --no-defaults --socket="$MDB_SOCK" -u root ping; }

start_mdb() {
    install -d -o mysql -g mysql -m 0755 "$MDB" "$MDB/run"
    if [[ ! -d $MDB/data/mysql ]]; then
        say "initialising this cluster's MariaDB datadir (~10 s, once)"
        install -d -o mysql -g mysql -m 0750 "$MDB/data"
        mariadb-install-db --no-defaults --user=mysql --datadir="$MDB/data" --auth-root-authentication-method=socket \
            --skip-test-db >"$MLOGS/mariadb-install-db.log" 2>&1 || die "mariadb-install-db failed ($MLOGS)"
    fi
    say "starting mariadbd in n0 (its loopback, port $MDB_PORT)"
    nsenter --net="/run/netns/$(ns_of 0)" setsid mariadbd --no-defaults --user=mysql --datadir="$MDB/data" \
        --socket="$MDB_SOCK" --pid-file="$MDB_PID" --port="$MDB_PORT" --bind-address=127.0.0.1 \
        --skip-name-resolve --log-error="$MLOGS/mariadb.log" --innodb-buffer-pool-size=64M \
        </dev/null >>"$MLOGS/mariadb.log" 2>&1 8>&- 9>&- &
    wait_for 60 mariadb mdb_ping || { logtail "$MLOGS/mariadb.log"; die "mariadbd did not come up"; }
    mariadb --no-defaults --socket="$MDB_SOCK" -u root -e "
        CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" || die "could not create the slurm DB user"
}

start_mdaemons() { # K
    local n=$1 k last
    start_mdb
    say "starting slurmdbd in n0"
    in_node 0 slurmdbd 8>&- 9>&- || { logtail "$MLOGS/slurmdbd.log"; die "slurmdbd failed to start"; }
    wait_for 30 slurmdbd client sacctmgr -n list cluster || { logtail "$MLOGS/slurmdbd.log"; die "slurmdbd does not answer"; }
    client sacctmgr -n -P list cluster format=cluster | grep -qx "$MCLUSTER" ||
        client sacctmgr -i add cluster "$MCLUSTER" >/dev/null || die "sacctmgr add cluster $MCLUSTER failed"
    # Job ids continue after the last one this cluster's DB knows, from 1000001: never those of the
    # single-node cluster, so submitit folders with %j shared by both never pick up a stale result.
    last=$(client sacct -a -X -n -P -D -S 1970-01-01 -E now -o JobIDRaw 2>/dev/null | tr -dc '0-9\n' | sort -n | tail -n 1)
    last=${last:-0}
    ((last >= 1000000)) || last=1000000
    echo "FirstJobId=$((last + 1))" >"$MSTATE/ctld/jobid.conf"
    say "starting slurmctld in n0 (clean queue, first job id $((last + 1)))"
    in_node 0 slurmctld -c -f "$MCONF" 8>&- 9>&- || { logtail "$MLOGS/slurmctld.log"; die "slurmctld failed to start"; }
    for ((k = 0; k < n; k++)); do
        say "starting slurmd -N n$k in $(ns_of $k)"
        in_node $k slurmd -N "n$k" -f "$MCONF" 8>&- 9>&- || { logtail "$MLOGS/slurmd-n$k.log"; die "slurmd n$k failed"; }
    done
}

wait_nodes_idle() { # K
    local deadline=$((SECONDS + 60)) ready
    while ((SECONDS < deadline)); do
        ready=$(client sinfo -h -N -o '%N %T' 2>/dev/null | awk '$2 ~ /^(idle|mixed|allocated|completing)/' | wc -l)
        ((ready == $1)) && return 0
        client sinfo -h -N -o '%N %T' 2>/dev/null | awk '$2 ~ /drain|inval|fail/ {print $1}' |
            while read -r nd; do client scontrol update NodeName="$nd" State=RESUME >/dev/null 2>&1 || true; done
        sleep 0.5
    done
    logtail "$MLOGS/slurmctld.log"
    die "not all $1 nodes became idle within 60 s: $(client sinfo -h -N -o '%N %T' 2>&1 | tr '\n' ' ')"
}

# ------------------------------------------------------------------ commands
mup() {
    local n=0 r=0 inter=1gbit intra=none
    while (($#)); do
        case $1 in
            --nodes) n=${2:-} ;;
            --ranks-per-node) r=${2:-} ;;
            --inter) inter=${2:-} ;;
            --intra) intra=${2:-} ;;
            *) echo "unknown option: $1" >&2; exit 2 ;;
        esac
        shift 2 || { echo "option $1 needs a value" >&2; exit 2; }
    done
    [[ $n =~ ^[0-9]+$ && $n -ge 1 && $n -le 32 ]] || { echo "--nodes must be 1..32, got '$n'" >&2; exit 2; }
    [[ $r =~ ^[0-9]+$ && $r -ge 1 ]] || { echo "--ranks-per-node must be >= 1, got '$r'" >&2; exit 2; }
    for rate in "$inter" "$intra"; do
        [[ $rate == none || $rate =~ ^[0-9]+(\.[0-9]+)?[kmg]bit$ ]] ||
            { echo "a rate is NUMBER{kbit,mbit,gbit} or none, got '$rate'" >&2; exit 2; }
    done
    need_root
    all_installed || die "packages missing (${PACKAGES[*]}): run '$HERE/local_cluster.sh install' first"
    local why
    why=$(netns_why_not)
    [[ -z $why ]] || { printf '[multinode] network namespaces cannot be made here: %s\n' "$why" >&2; exit 3; }
    mkdir -p "$MSTATE"
    exec 8>"$MSTATE/.lock"
    flock -w 180 8 || die "another multinode.sh is running (lock $MSTATE/.lock)"
    if [[ $(cat "$SPEC" 2>/dev/null) == "$n $r $inter $intra" ]] && mstatus >/dev/null 2>&1; then
        say "already up: $n nodes x $r ranks, inter $inter, intra $intra"
        return 0
    fi
    mdown_locked
    say "network: $n node namespaces on a bridge, inter-node $inter, intra-node $intra"
    make_network "$n" "$inter" "$intra"
    start_munge
    write_mconfigs "$n" "$r"
    start_mdaemons "$n"
    echo "$n $r $inter $intra" >"$SPEC"
    wait_nodes_idle "$n"
    say "cluster $MCLUSTER up: $(client sinfo -h -o '%P %D nodes %N %T' | head -n 1); clients: $0 exec CMD"
}

mdown_locked() {
    local ns pid
    local specs=("$MRUN/slurmctld.pid:slurmctld" "$MRUN/slurmdbd.pid:slurmdbd" "$MDB_PID:mariadbd")
    for pid in "$MRUN"/slurmd-*.pid; do [[ -e $pid ]] && specs+=("$pid:slurmd"); done
    stop_daemons "${specs[@]}"
    for ns in $(our_namespaces); do   # whatever else still lives in our namespaces: jobs, ranks, clients
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
        ip netns del "$ns" 2>/dev/null || true
        rm -rf "/etc/netns/${ns:?}"
    done
    ip route del blackhole "$SUBNET.0/24" 2>/dev/null || true
    rm -f "$SPEC" "$MRUN"/*.pid
    if [[ -e $MUNGE_MARK ]] && ! alive_pid "$RUN/slurmctld.pid" slurmctld >/dev/null; then
        stop_daemons "$MUNGE_PID:munged"   # only the munged we started, and only if no other cluster uses it
        rm -f "$MUNGE_MARK"
    elif [[ -e $MUNGE_MARK ]]; then        # the single-node cluster still uses it: its `stop` stops it
        mkdir -p "$RUN" && mv -f "$MUNGE_MARK" "$RUN/munged.started-by-us"
    fi
}

mdown() {
    [[ $EUID -eq 0 ]] || die "must run as root"
    mkdir -p "$MSTATE"
    exec 8>"$MSTATE/.lock"
    flock -w 180 8 || die "another multinode.sh is running (lock $MSTATE/.lock)"
    mdown_locked
    [[ ${1:-} == --purge ]] && rm -rf "${MSTATE:?}/mysql" "$MSTATE/log" "$MSTATE/ctld" "$MSTATE/spool"
    say "down: no ${PFX}* namespace, no blackhole route for $SUBNET.0/24"
}

mstatus() {
    local n ok=0 ready
    n=$(nodes_up)
    ((n > 0)) && [[ -e /run/netns/$(ns_of 0) ]] || { echo "multi-node cluster: not up"; return 1; }
    echo "multi-node cluster $MCLUSTER: $(cat "$SPEC") (nodes ranks/node inter intra), SLURM_CONF=$MCONF"
    client sinfo -N -o '%N %P %T %c' || ok=1
    ready=$(client sinfo -h -N -o '%T' 2>/dev/null | grep -cE '^(idle|mixed|allocated|completing)' || true)
    ((ready == n)) || ok=1
    client sacctmgr -n list cluster >/dev/null 2>&1 || { echo "slurmdbd: not answering"; ok=1; }
    return $ok
}

mexec() {
    local k=0
    [[ ${1:-} == --node ]] && { k=$2; shift 2; }
    [[ ${1:-} == -- ]] && shift
    (($#)) || { echo "exec: no command" >&2; exit 2; }
    [[ -e /run/netns/$(ns_of "$k") ]] || { echo "exec: node $k is not up (run: local_cluster.sh up --nodes K ...)" >&2; exit 2; }
    exec ip netns exec "$(ns_of "$k")" env SLURM_CONF="$MCONF" "$@"
}

case ${1:-} in
    up) shift; mup "$@" ;;
    down) shift; mdown "$@" ;;
    status) mstatus || exit 1 ;;
    exec) shift; mexec "$@" ;;
    *) sed -n '2,/^set -E/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
