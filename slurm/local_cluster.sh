#!/usr/bin/env bash
# slurm/local_cluster.sh -- a single-node SLURM cluster (with accounting) for tests.
#
# For a root Debian 12 machine without systemd or usable cgroups (a CI container / sandbox VM).
# Uses Debian's slurm-wlm 22.05 + munge, and slurmdbd + a private MariaDB so that `sacct`
# (which submitit uses to see job states) works.
#
#   bash slurm/local_cluster.sh up       # install (if needed) + start
#   bash slurm/local_cluster.sh install  # apt-get update + install the packages (no-op if present)
#   bash slurm/local_cluster.sh start    # write configs, start the daemons, wait for the node to be idle
#   bash slurm/local_cluster.sh status   # daemons, node and queue; exit 0 only if the cluster is usable
#   bash slurm/local_cluster.sh stop     # cancel jobs, stop the daemons this script started
#
# Multi-node (slurm/multinode.sh, beside the single-node cluster, one network namespace per node):
#   bash slurm/local_cluster.sh up --nodes K --ranks-per-node R [--inter RATE|none] [--intra RATE|none]
#   bash slurm/local_cluster.sh mstatus | down [--purge] | exec [--node K] CMD...
#
# Knobs (environment):
#   SLURM_LOCAL_DIR        state, logs, spool, DB, fake GPUs   (default /tmp/slurm-local)
#   SLURM_LOCAL_CPUS       CPUs advertised by the node         (default 16, may exceed the real cores)
#   SLURM_LOCAL_GPUS       fake GPUs (symlinks to /dev/null)   (default 8; 0 = no gres)
#   SLURM_LOCAL_PARTITION  the (default) partition             (default debug)
#   SLURM_LOCAL_CLUSTER    ClusterName                         (default dspbench)
#   SLURM_LOCAL_DB_PORT    port of the private MariaDB         (default 3307)
#
# Touches only: the Debian packages below, /etc/slurm/{slurm.conf,gres.conf,slurmdbd.conf},
# /run/munge (munged's runtime dir), $SLURM_LOCAL_DIR, and -- only when the host name does not
# resolve -- one marked line in /etc/hosts.
set -Eeuo pipefail

PACKAGES=(munge slurmctld slurmd slurm-client slurmdbd mariadb-server)

STATE=${SLURM_LOCAL_DIR:-/tmp/slurm-local}
CPUS=${SLURM_LOCAL_CPUS:-16}
GPUS=${SLURM_LOCAL_GPUS:-8}
PARTITION=${SLURM_LOCAL_PARTITION:-debug}
CLUSTER=${SLURM_LOCAL_CLUSTER:-dspbench}
DB_PORT=${SLURM_LOCAL_DB_PORT:-3307}
CONF_DIR=/etc/slurm
NODE=$(hostname -s 2>/dev/null || true)
NODE=${NODE:-localhost}

RUN=$STATE/run
LOGS=$STATE/log
DB_DIR=$STATE/mysql
DB_SOCK=$DB_DIR/run/mysqld.sock
DB_PID=$DB_DIR/run/mysqld.pid
MUNGE_PID=/run/munge/munged.pid
MUNGE_MARK=$RUN/munged.started-by-us
# the multi-node cluster's (slurm/multinode.sh): munged is shared, so each side asks before stopping it
MULTI_CTLD_PID=${SLURM_MULTI_DIR:-/tmp/slurm-multi}/run/slurmctld.pid
MULTI_MUNGE_MARK=${SLURM_MULTI_DIR:-/tmp/slurm-multi}/run/munged.started-by-us

T0=${EPOCHREALTIME/[.,]/}
say() {
    local dt=$(((${EPOCHREALTIME/[.,]/} - T0) / 100000))
    printf '[local_cluster %3d.%ds] %s\n' $((dt / 10)) $((dt % 10)) "$*"
}
die() {
    printf '[local_cluster] ERROR: %s\n' "$*" >&2
    exit 1
}
trap 'rc=$?; printf "[local_cluster] ERROR: command failed (exit %s) at line %s: %s\n" "$rc" "$LINENO" "$BASH_COMMAND" >&2' ERR

need_root() { [[ $EUID -eq 0 ]] || die "must run as root (it installs packages and starts system daemons)"; }

# tail of a log file, for error messages
logtail() { [[ -f $1 ]] && { echo "---- last lines of $1:"; tail -n "${2:-20}" "$1"; } >&2 || true; }

# pid from a pidfile if that process is alive and its command matches $2
alive_pid() {
    local pidfile=$1 name=$2 pid comm
    [[ -r $pidfile ]] || return 1
    pid=$(tr -dc '0-9' <"$pidfile")
    [[ -n $pid && -r /proc/$pid/comm ]] || return 1
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
    [[ $comm == "$name"* ]] || return 1
    echo "$pid"
}

# wait_for SECONDS DESCRIPTION COMMAND... : poll COMMAND every 0.2 s until it succeeds
wait_for() {
    local secs=$1 what=$2
    shift 2
    local deadline=$((SECONDS + secs))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
}

# ------------------------------------------------------------------ install
all_installed() {
    local n
    n=$(dpkg-query -W -f='${db:Status-Status}\n' "${PACKAGES[@]}" 2>/dev/null | grep -cx installed || true)
    [[ $n -eq ${#PACKAGES[@]} ]]
}

cmd_install() {
    need_root
    if all_installed; then
        say "packages already installed: ${PACKAGES[*]}"
        return 0
    fi
    command -v apt-get >/dev/null || die "apt-get not found: this script supports Debian/Ubuntu only"
    # Without systemd, the packages' postinst would try to start the daemons with Debian's
    # default configs. Block that with a temporary policy-rc.d if the machine has none.
    local tmp_policy=""
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        say "no /usr/sbin/policy-rc.d: installing a temporary one so apt does not start services"
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        tmp_policy=/usr/sbin/policy-rc.d
    fi
    mkdir -p "$LOGS"
    say "apt-get update"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq || die "apt-get update failed"
    say "apt-get install ${PACKAGES[*]} (this takes ~30-60 s on a fresh machine)"
    local rc=0
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${PACKAGES[@]}" \
        >"$LOGS/apt.log" 2>&1 || rc=$?
    [[ -n $tmp_policy ]] && rm -f "$tmp_policy"
    if ((rc != 0)); then
        logtail "$LOGS/apt.log" 30
        die "apt-get install failed (full log: $LOGS/apt.log)"
    fi
    all_installed || die "packages still not installed after apt-get: ${PACKAGES[*]}"
    say "installed: $(dpkg-query -W -f='${Package} ${Version}, ' slurmctld munge mariadb-server | sed 's/, $//')"
}

# ------------------------------------------------------------------ configs
CHANGED=0     # slurm.conf or gres.conf changed
CHANGED_DBD=0 # slurmdbd.conf changed
# write_file PATH MODE : content on stdin; replaces PATH only if the content differs (sets CHANGED)
write_file() {
    local path=$1 mode=$2 tmp
    tmp=$(mktemp "$path.XXXXXX")
    cat >"$tmp"
    chmod "$mode" "$tmp"
    if [[ -f $path ]] && cmp -s "$tmp" "$path"; then
        rm -f "$tmp"
    else
        mv -f "$tmp" "$path"
        say "wrote $path"
        CHANGED=1
    fi
}

# The scheduling policy both clusters share (multinode.sh prints it too): one place to change it.
policy_conf() {
    cat <<'EOF'
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire (default 120 s) is also how long a requeued job must wait before it can run again.
AuthInfo=cred_expire=10
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MailProg=/bin/true
# No systemd, no usable cgroups: track processes via /proc, no task containment.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobContainerType=job_container/none
MpiDefault=none
SwitchType=switch/none
# Let a node advertise more CPUs than the hardware has.
SlurmdParameters=config_overrides
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
# Reject jobs larger than the node at submission instead of leaving them pending forever.
EnforcePartLimits=ALL
# Batch jobs are requeueable by default (submitit's checkpoint/requeue calls scontrol requeue).
JobRequeue=1
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=5,bf_interval=2
EOF
}

write_configs() {
    mkdir -p "$CONF_DIR" "$RUN" "$LOGS" "$STATE/ctld" "$STATE/spool"
    local mem_mb
    mem_mb=$(awk '/^MemTotal:/ {print int($2/1024)}' /proc/meminfo)

    # Fake GPUs: gres needs File= entries that are devices, so use symlinks to /dev/null.
    local gres_node="" gres_line=""
    if ((GPUS > 0)); then
        mkdir -p "$STATE/fakegpu"
        local i
        for ((i = 0; i < GPUS; i++)); do
            [[ -L $STATE/fakegpu/nvidia$i ]] || ln -sfn /dev/null "$STATE/fakegpu/nvidia$i"
        done
        gres_node=" Gres=gpu:$GPUS"
        gres_line="NodeName=$NODE Name=gpu File=$STATE/fakegpu/nvidia[0-$((GPUS - 1))]"
    fi

    write_file "$CONF_DIR/slurm.conf" 644 <<EOF
# Written by dspbench slurm/local_cluster.sh -- single-node test cluster. Do not edit; rerun the script.
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
$(policy_conf)
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStorageTRES=gres/gpu
GresTypes=gpu
Include $STATE/ctld/jobid.conf
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$mem_mb$gres_node State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=7-00:00:00 State=UP
EOF

    write_file "$CONF_DIR/gres.conf" 644 <<EOF
# Written by dspbench slurm/local_cluster.sh: fake GPUs (symlinks to /dev/null).
AutoDetect=off
$gres_line
EOF

    local changed_slurm=$CHANGED
    CHANGED=0
    write_file "$CONF_DIR/slurmdbd.conf" 600 <<EOF
# Written by dspbench slurm/local_cluster.sh
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
DebugLevel=info
LogFile=$LOGS/slurmdbd.log
PidFile=$RUN/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
EOF
    CHANGED_DBD=$CHANGED
    CHANGED=$changed_slurm
    # No cgroup.conf: with proctrack/linuxproc + task/none nothing uses cgroups.
    # included by slurm.conf; FirstJobId is written here at each slurmctld start (an empty file warns)
    [[ -s $STATE/ctld/jobid.conf ]] || echo '# FirstJobId: see start_slurmctld' >"$STATE/ctld/jobid.conf"
}

# ------------------------------------------------------------------ daemons
ensure_hosts() {
    if ! getent hosts "$NODE" >/dev/null; then
        say "host name '$NODE' does not resolve: adding '127.0.0.1 $NODE' to /etc/hosts"
        echo "127.0.0.1 $NODE  # added by dspbench slurm/local_cluster.sh" >>/etc/hosts
    fi
}

start_munge() {
    # (munge -n alone would retry for seconds against a stale socket: check the pid first)
    if alive_pid "$MUNGE_PID" munged >/dev/null && munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        say "munged: already running"
        return 0
    fi
    if [[ ! -s /etc/munge/munge.key ]]; then
        say "creating /etc/munge/munge.key"
        runuser -u munge -- mungekey --create >/dev/null
    fi
    install -d -o munge -g munge -m 0755 /run/munge
    say "starting munged"
    # the mark's folder may not exist yet (multinode.sh starts munged before writing its configs)
    mkdir -p "${MUNGE_MARK%/*}"
    runuser -u munge -- munged 8>&- 9>&- || die "munged failed to start (see /var/log/munge/munged.log)"
    touch "$MUNGE_MARK"
    wait_for 10 munge bash -c 'munge -n | unmunge' || die "munge does not answer (see /var/log/munge/munged.log)"
}

db_ping() { mariadb-admin --no-defaults --socket="$DB_SOCK" -u root ping; }

start_mariadb() {
    if pid=$(alive_pid "$DB_PID" mariadbd) && db_ping >/dev/null 2>&1; then
        say "mariadbd: already running (pid $pid, port $DB_PORT)"
        return 0
    fi
    # The socket/pid dir must belong to mysql (a root-owned one gives "Bind on unix socket: Permission denied").
    install -d -o mysql -g mysql -m 0755 "$DB_DIR" "$DB_DIR/run"
    if [[ ! -d $DB_DIR/data/mysql ]]; then
        say "initialising the private MariaDB datadir $DB_DIR/data (~10 s, once)"
        install -d -o mysql -g mysql -m 0750 "$DB_DIR/data"
        mariadb-install-db --no-defaults --user=mysql --datadir="$DB_DIR/data" \
            --auth-root-authentication-method=socket --skip-test-db \
            >"$LOGS/mariadb-install-db.log" 2>&1 ||
            { logtail "$LOGS/mariadb-install-db.log"; die "mariadb-install-db failed"; }
    fi
    say "starting mariadbd on 127.0.0.1:$DB_PORT"
    setsid mariadbd --no-defaults --user=mysql --datadir="$DB_DIR/data" \
        --socket="$DB_SOCK" --pid-file="$DB_PID" --port="$DB_PORT" --bind-address=127.0.0.1 \
        --skip-name-resolve --log-error="$LOGS/mariadb.log" \
        --innodb-buffer-pool-size=1G --innodb-log-file-size=64M --innodb-lock-wait-timeout=900 \
        </dev/null >>"$LOGS/mariadb.log" 2>&1 9>&- &
    wait_for 60 mariadb db_ping || { logtail "$LOGS/mariadb.log"; die "mariadbd did not come up"; }
    mariadb --no-defaults --socket="$DB_SOCK" -u root -e "
        CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" ||
        die "could not create the slurm database user"
}

start_slurmdbd() {
    if pid=$(alive_pid "$RUN/slurmdbd.pid" slurmdbd); then
        say "slurmdbd: already running (pid $pid)"
    else
        say "starting slurmdbd"
        slurmdbd 9>&- || { logtail "$LOGS/slurmdbd.log"; die "slurmdbd failed to start"; }
    fi
    wait_for 30 slurmdbd sacctmgr -n list cluster ||
        { logtail "$LOGS/slurmdbd.log"; die "slurmdbd does not answer (sacctmgr list cluster)"; }
    if ! sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
        say "registering cluster '$CLUSTER' with sacctmgr"
        sacctmgr -i add cluster "$CLUSTER" >/dev/null || die "sacctmgr add cluster $CLUSTER failed"
    fi
}

start_slurmctld() {
    if pid=$(alive_pid "$RUN/slurmctld.pid" slurmctld); then
        say "slurmctld: already running (pid $pid)"
        return 0
    fi
    # slurmctld -c starts with an empty queue (a stale saved state can hold ghost jobs after a
    # crash). Continue the job ids after the last one known (accounting DB, batch scripts left in
    # the state dir), so ids are not reused: submitit folders with %j would pick up old results.
    local last
    last=$({
        sacct -a -X -n -P -D -S 1970-01-01 -E now -o JobIDRaw 2>/dev/null || true
        find "$STATE/ctld" -mindepth 2 -maxdepth 2 -name 'job.*' -printf '%f\n' 2>/dev/null || true
    } | tr -dc '0-9\n' | sort -n | tail -n 1)
    printf '# written by local_cluster.sh at each slurmctld start\nFirstJobId=%s\n' "$((${last:-0} + 1))" \
        >"$STATE/ctld/jobid.conf"
    say "starting slurmctld (clean queue, first job id $((${last:-0} + 1)))"
    slurmctld -c 9>&- || { logtail "$LOGS/slurmctld.log"; die "slurmctld failed to start"; }
}

start_slurmd() {
    if pid=$(alive_pid "$RUN/slurmd.pid" slurmd); then
        say "slurmd: already running (pid $pid)"
        return 0
    fi
    say "starting slurmd (node $NODE, CPUs=$CPUS, gpus=$GPUS)"
    slurmd -N "$NODE" 9>&- || { logtail "$LOGS/slurmd.log"; die "slurmd failed to start"; }
}

node_state() { sinfo -h -n "$NODE" -o '%T' 2>/dev/null | head -n 1; }

wait_node_ready() {
    local deadline=$((SECONDS + 60)) st=""
    while ((SECONDS < deadline)); do
        st=$(node_state || true)
        case $st in
            idle | mixed | allocated | completing) return 0 ;;
            *drain* | inval* | fail*)
                say "node $NODE is '$st' ($(sinfo -h -R -n "$NODE" -o '%E' 2>/dev/null)); resuming it"
                scontrol update NodeName="$NODE" State=RESUME >/dev/null 2>&1 || true
                sleep 1
                ;;
            *) sleep 0.3 ;;
        esac
    done
    logtail "$LOGS/slurmctld.log"
    logtail "$LOGS/slurmd.log"
    die "node $NODE did not become idle within 60 s (state: '${st:-none}', reason: $(sinfo -h -R -o '%E' 2>/dev/null))"
}

# stop_daemons PIDFILE:NAME... : SIGTERM them together, wait up to 20 s, then SIGKILL what is left
stop_daemons() {
    local spec pid pids=() names=()
    for spec in "$@"; do
        pid=$(alive_pid "${spec%%:*}" "${spec##*:}") || continue
        say "stopping ${spec##*:} (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        pids+=("$pid") names+=("${spec##*:}")
    done
    local deadline=$((SECONDS + 20)) i left
    while :; do
        left=0
        for i in "${!pids[@]}"; do [[ -e /proc/${pids[i]} ]] && left=1; done
        ((left && SECONDS < deadline)) || break
        sleep 0.2
    done
    for i in "${!pids[@]}"; do
        if [[ -e /proc/${pids[i]} ]]; then
            say "${names[i]} did not exit after 20 s: SIGKILL"
            kill -KILL "${pids[i]}" 2>/dev/null || true
        fi
    done
}

# ------------------------------------------------------------------ commands
cmd_start() {
    need_root
    all_installed || die "packages missing (${PACKAGES[*]}): run '$0 install' (or '$0 up') first"
    mkdir -p "$STATE"
    # fd 9 holds the lock; every daemon is started with 9>&- so that it does not inherit it.
    exec 9>"$STATE/.lock"
    flock -w 180 9 || die "another local_cluster.sh is running (lock $STATE/.lock)"
    ensure_hosts
    write_configs
    if ((CHANGED)); then
        local restarted=0
        for d in slurmctld slurmd; do
            if alive_pid "$RUN/$d.pid" "$d" >/dev/null; then
                ((restarted)) || say "config changed while the cluster runs: restarting slurmctld and slurmd (running jobs are lost)"
                restarted=1
            fi
        done
        ((restarted)) && stop_daemons "$RUN/slurmd.pid:slurmd" "$RUN/slurmctld.pid:slurmctld"
    fi
    if ((CHANGED_DBD)) && alive_pid "$RUN/slurmdbd.pid" slurmdbd >/dev/null; then
        say "slurmdbd.conf changed: restarting slurmdbd"
        stop_daemons "$RUN/slurmdbd.pid:slurmdbd"
    fi
    start_munge
    start_mariadb
    start_slurmdbd
    start_slurmctld
    start_slurmd
    wait_node_ready
    say "cluster up: $(sinfo -h -o 'partition %P, node %N: %T, CPUs %c, gres %G' | head -n 1)"
}

cmd_stop() {
    need_root
    mkdir -p "$STATE"
    exec 9>"$STATE/.lock"
    flock -w 180 9 || die "another local_cluster.sh is running (lock $STATE/.lock)"
    if alive_pid "$RUN/slurmctld.pid" slurmctld >/dev/null; then
        local jobs
        jobs=$(squeue -h -o '%A' 2>/dev/null | tr '\n' ' ' || true)
        if [[ -n ${jobs// /} ]]; then
            say "cancelling jobs: $jobs"
            # shellcheck disable=SC2086
            scancel $jobs 2>/dev/null || true
            wait_for 30 "jobs gone" bash -c '[[ -z $(squeue -h -o %A 2>/dev/null) ]]' || true
        fi
    fi
    stop_daemons "$RUN/slurmd.pid:slurmd" "$RUN/slurmctld.pid:slurmctld"
    stop_daemons "$RUN/slurmdbd.pid:slurmdbd"
    if [[ -e $MUNGE_MARK ]] && alive_pid "$MULTI_CTLD_PID" slurmctld >/dev/null; then
        stop_daemons "$DB_PID:mariadbd"
        say "munged: started here but the multi-node cluster still uses it; its 'down' stops it"
        mv -f "$MUNGE_MARK" "$MULTI_MUNGE_MARK" 2>/dev/null || true
    elif [[ -e $MUNGE_MARK ]]; then
        stop_daemons "$DB_PID:mariadbd" "$MUNGE_PID:munged"
        rm -f "$MUNGE_MARK"
    else
        stop_daemons "$DB_PID:mariadbd"
        say "munged: not started by this script, left alone"
    fi
    say "stopped"
}

cmd_status() {
    local ok=0 pid d
    if pid=$(alive_pid "$MUNGE_PID" munged) && munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        printf '%-10s %s\n' munged "running (pid $pid)"
    else
        printf '%-10s %s\n' munged DOWN
        ok=1
    fi
    if pid=$(alive_pid "$DB_PID" mariadbd); then
        printf '%-10s %s\n' mariadbd "running (pid $pid, port $DB_PORT)"
    else
        printf '%-10s %s\n' mariadbd DOWN
        ok=1
    fi
    for d in slurmdbd slurmctld slurmd; do
        if pid=$(alive_pid "$RUN/$d.pid" "$d"); then
            printf '%-10s %s\n' "$d" "running (pid $pid)"
        else
            printf '%-10s %s\n' "$d" DOWN
            ok=1
        fi
    done
    local st
    st=$(node_state || true)
    printf '%-10s %s\n' node "$NODE: ${st:-unknown}"
    case $st in idle | mixed | allocated | completing) ;; *) ok=1 ;; esac
    if command -v sinfo >/dev/null && [[ -n $st ]]; then
        sinfo -o '%P %a %l %D %T %c %G %N' 2>/dev/null || true
        echo "jobs in queue: $(squeue -h 2>/dev/null | wc -l)"
    fi
    echo "configs: $CONF_DIR/{slurm,gres,slurmdbd}.conf   state+logs: $STATE"
    return $ok
}

main() {
    local cmd=${1:-}
    case $cmd in
        install) cmd_install ;;
        start) cmd_start ;;
        up)
            # up --nodes K ...: the multi-node cluster in network namespaces (slurm/multinode.sh)
            if (($# > 1)); then shift; exec bash "$(dirname "${BASH_SOURCE[0]}")/multinode.sh" up "$@"; fi
            cmd_install && cmd_start ;;
        down | mstatus | exec)   # the multi-node cluster only; the single-node one is `stop`/`status`
            [[ $cmd == mstatus ]] && set -- status "${@:2}"
            exec bash "$(dirname "${BASH_SOURCE[0]}")/multinode.sh" "$@" ;;
        stop) cmd_stop ;;
        status)   # the single-node cluster (its exit code), then a line on the multi-node one
            local rc=0
            cmd_status || rc=1
            echo "---- multi-node cluster (details: $0 mstatus):"
            bash "$(dirname "${BASH_SOURCE[0]}")/multinode.sh" status 2>&1 | head -n 1 || true
            exit $rc ;;
        *)
            sed -n '2,/^set -E/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
            [[ -z $cmd || $cmd == -h || $cmd == --help || $cmd == help ]] || die "unknown command: $cmd"
            ;;
    esac
}

# sourced by multinode.sh for its helpers: run main only when executed
[[ ${BASH_SOURCE[0]} != "$0" ]] || main "$@"
