"""One SLURM job of a sweep: configurations of one allocation shape, each isolated in its own processes.

Every task of the job (one per rank) walks the same list of configurations. For each it starts its rank
as a subprocess, `python -m dspbench.cli run --launcher env ... --outcome-prefix logs/.../<run_id>`,
with a fresh MASTER_PORT (task 0 picks a free one: ports.py) and a wall-clock deadline, so a crash or
a hang costs one data point, not the job. Every rank leaves a heartbeat and its outcome beside its
log, rank 0 its record (outcome.py); task 0 appends the configuration's one record to the job's
records file, naming the culprit rank and the kind (timeout vs error) from all ranks' accounts. Task
0 then marks the configuration done (logs/): the other tasks stop their rank of it shortly after that
mark and wait for it before starting the next configuration, so the ranks of a configuration start
together and no rendezvous waits on a laggard.

Preemption and time limits: SLURM sends USR2 `signal_delay_s` before the end. Task 0 notes it, lets
the running configuration finish if it can end DRAIN_MARGIN_S before the kill (else kills it: it
reruns), starts nothing new, and then, if configurations are left, hands over to submitit, which calls
`checkpoint()` (this job with the configurations that have no record yet) and requeues the job.
Nothing left: the job simply completes. A rank killed by SIGTERM means the job is being cancelled:
no record, the configuration reruns on resume.
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from dspbench.facts.args import config_argv
from dspbench.records.config import RunConfig
from dspbench.records.io import append_record, read_records

from dspbench.slurm import ports
from dspbench.slurm.outcome import all_ended_ok, compose, gather, paths, silent_exit, write_outcome
from dspbench.slurm.plan import DRAIN_MARGIN_S, GRACE_S

RELEASE_S = 5.0         # other ranks may linger this long once rank 0 is done with a configuration
POLL_S = 0.2
STOP_SIGNALS = (-signal.SIGTERM, -signal.SIGINT, -signal.SIGHUP)


@dataclass
class Task:
    """Where this process stands in the job: its rank(s), the job's records file and log folder."""
    job_id: str
    rank: int
    master_addr: str
    records: Path
    logs: Path
    all_ranks_here: bool
    stopping: bool = False           # SIGTERM: the job is being cancelled
    drain_until: float | None = None  # USR2: the running configuration must end by then

    @classmethod
    def current(cls, job: "SweepJob") -> "Task":
        import submitit     # in the job only: planning and --dry-run need no [slurm] extra
        job_id = submitit.JobEnvironment().job_id
        if job.all_ranks_here:
            rank, master = 0, "127.0.0.1"
        else:   # RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR from SLURM_*; ranks see every GPU of the node
            dist = submitit.helpers.TorchDistributedEnvironment().export(set_cuda_visible_devices=False,
                                                                         overwrite=True)
            rank, master = dist.rank, dist.master_addr
        attempt = os.environ.get("SLURM_RESTART_COUNT", "0")
        root = Path(job.results)
        return cls(job_id, rank, master, root / "records" / f"{job_id}.jsonl",
                   root / "logs" / job_id / f"attempt{attempt}", job.all_ranks_here)

    @property
    def owner(self) -> bool:
        """The task that holds rank 0 owns the records."""
        return self.rank == 0

    def ranks(self, cfg: RunConfig) -> list[int]:
        return list(range(cfg.gpus)) if self.all_ranks_here else [self.rank]

    def marker(self, rid: str) -> Path:
        return self.logs / f"{rid}.done"

    def prefix(self, rid: str) -> Path:
        """Where the ranks of a configuration leave log, heartbeat, outcome and (rank 0) record."""
        return self.logs / rid

    def port(self, rid: str) -> int | None:
        """The configuration's rendezvous port: task 0 chooses a free one and publishes it (ports.py),
        the others read it; None when task 0 published nothing in time (it is gone)."""
        path = self.logs / f"{rid}.port"
        if self.owner:
            ports.publish(path, ports.choose(str(path)))
        return ports.wait_published(path, GRACE_S + 60, POLL_S, stop=lambda: self.stopping)


@dataclass
class Running:
    cfg: RunConfig
    procs: dict[int, subprocess.Popen]
    deadline: float

    def codes(self, killed: set[int]) -> dict[int, int | None]:
        """Exit code of each local rank; None for those the job killed (they did not end by themselves)."""
        return {r: None if r in killed else p.returncode for r, p in self.procs.items()}


@dataclass
class SweepJob:
    """The submitit callable: module-level and checkpointable (requeue with what is left)."""
    results: str                    # the sweep's results directory (shared by every node)
    configs: list[dict]             # RunConfig dicts, launcher env
    signal_delay_s: float = 0.0     # USR2 -> kill, from the cluster profile
    all_ranks_here: bool = False    # debug executor: this one task starts every rank itself

    def __call__(self) -> dict[str, str]:
        self._task = task = Task.current(self)
        self._running: Running | None = None
        task.logs.mkdir(parents=True, exist_ok=True)
        requeue = self._trap_signals(task)
        statuses = {}
        for i, d in enumerate(self.configs):
            cfg = RunConfig.from_dict(d)
            if task.stopping or task.drain_until is not None:
                break
            if i and not task.owner and not self._wait_marker(task, self.configs[i - 1]):
                break
            statuses[cfg.run_id()] = self._run(task, cfg)
        if requeue is not None and task.drain_until is not None and self.left():
            requeue(signal.SIGUSR2, None)   # submitit: checkpoint(), scontrol requeue, exit
        return statuses if task.owner else {}

    def _trap_signals(self, task: Task):
        """SIGTERM: stop. USR2 in task 0: drain first, requeue after (returns submitit's handler)."""
        if task.all_ranks_here:          # debug: this is the user's process, leave its signals alone
            return None
        signal.signal(signal.SIGTERM, lambda *_: setattr(task, "stopping", True))
        submitit_handler = signal.getsignal(signal.SIGUSR2)
        if not task.owner or not callable(submitit_handler):
            return None
        window = max(self.signal_delay_s - DRAIN_MARGIN_S, 0)
        signal.signal(signal.SIGUSR2, lambda *_: setattr(task, "drain_until", time.monotonic() + window))
        return submitit_handler

    def checkpoint(self) -> "submitit.helpers.DelayedSubmission":
        """Submitit calls this in task 0 to requeue: the same job with the configurations left."""
        import submitit
        run = getattr(self, "_running", None)
        if run is not None:     # called mid-configuration (USR2 before __call__ took it over): rerun it
            _kill([p for p in run.procs.values() if p.poll() is None])
        return submitit.helpers.DelayedSubmission(replace(self, configs=self.left()))

    def left(self) -> list[dict]:
        """Configurations without a record in this job's file (all of them before the job started)."""
        task = getattr(self, "_task", None)
        done = set(recorded(task.records)) if task is not None else set()
        return [d for d in self.configs if RunConfig.from_dict(d).run_id() not in done]

    # ------------------------------------------------------------ one configuration
    def _run(self, task: Task, cfg: RunConfig) -> str:
        port = task.port(cfg.run_id())
        if port is None:           # task 0 is gone: this task starts nothing more
            task.stopping = True
            return "-"
        procs = {r: _spawn(task, cfg, r, port) for r in task.ranks(cfg)}
        self._running = run = Running(cfg, procs, time.monotonic() + cfg.timeout_s + GRACE_S)
        ended, killed = self._wait(task, run)
        self._running = None
        if ended == "drained" and _rank0_record(task, cfg) is None:   # it reruns after the requeue
            return recorded(task.records).get(cfg.run_id(), "requeued")
        if not task.owner:
            _own_outcomes(task, run, killed)
            return "-"
        return self._settle(task, run, ended == "killed", killed)

    def _wait(self, task: Task, run: Running) -> tuple[str, set[int]]:
        """Until every local rank ended: 'done', or 'killed' (its deadline), or 'drained' (USR2); and
        the local ranks the job killed."""
        released = None
        while alive := {r: p for r, p in run.procs.items() if p.poll() is None}:
            now = time.monotonic()
            if now > run.deadline:
                return "killed", _kill(alive)
            if task.drain_until is not None and now > task.drain_until and task.owner:
                return "drained", _kill(alive)
            if released is None and _rank0_done(task, run):
                released = now
            if released is not None and now > released + RELEASE_S:
                return "done", _kill(alive)     # rank 0 is done: whatever these wait for will not come
            time.sleep(POLL_S)
        return "done", set()

    def _settle(self, task: Task, run: Running, deadline_hit: bool, killed: set[int]) -> str:
        """Task 0: append the configuration's one record (composed from every rank's end), mark it done."""
        cfg, rid = run.cfg, run.cfg.run_id()
        status = recorded(task.records).get(rid)
        if status is not None:        # already there (an earlier attempt of this job): never twice
            task.marker(rid).touch()
            return status
        rec, code = _rank0_record(task, cfg), run.procs[0].returncode
        if rec is None and not deadline_hit and code in STOP_SIGNALS:
            task.stopping = True       # the job is being cancelled: record nothing, rerun on resume
            return "stopped"
        if rec is None or rec["status"] != "ok":
            ends = gather(task.prefix(rid), cfg.gpus, run.codes(killed), wait_remote=not task.all_ranks_here)
            if rec is None or not all_ended_ok(ends):   # else rank 0's own verdict stands (a budget's `oom`)
                status, why = compose(cfg, ends, deadline_hit)
                tail = _tail(paths(task.prefix(rid), 0)["log"]) if rec is None else ""
                rec = {**(rec or _bare_record(cfg)), "status": status,
                       "error": why + (f"; rank 0's output ends: {tail}" if tail else "")}
        append_record(task.records, rec)
        task.marker(rid).touch()
        return rec["status"]

    def _wait_marker(self, task: Task, prev: dict) -> bool:
        """Other tasks: start the next configuration only once task 0 has finished the previous one."""
        cfg = RunConfig.from_dict(prev)
        deadline = time.monotonic() + cfg.timeout_s + GRACE_S + 60
        while not task.marker(cfg.run_id()).exists():
            if task.stopping or time.monotonic() > deadline:
                return False
            time.sleep(POLL_S)
        return True


# ---------------------------------------------------------------- helpers
def _rank0_done(task: Task, run: Running) -> bool:
    if task.owner:
        return run.procs[0].poll() is not None
    return task.marker(run.cfg.run_id()).exists()


def rank_command(cfg: RunConfig, records: Path) -> list[str]:
    """The `dspbench run` a rank executes: every RunConfig field as its flag (facts/args.py)."""
    return [sys.executable, "-m", "dspbench.cli", "run", *config_argv(cfg), "--records-file", str(records)]


def _spawn(task: Task, cfg: RunConfig, rank: int, port: int) -> subprocess.Popen:
    env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(cfg.gpus), "MASTER_ADDR": task.master_addr,
           "MASTER_PORT": str(port)}
    if task.all_ranks_here:
        env.update(LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(cfg.gpus))
    if "SLURM_CPUS_PER_TASK" in env:      # os.cpu_count() would count the whole node
        env.setdefault("OMP_NUM_THREADS", env["SLURM_CPUS_PER_TASK"])
    # Rank 0's record goes beside the logs: task 0 appends the configuration's one record (outcome.py).
    files = paths(task.prefix(cfg.run_id()), rank)
    argv = rank_command(cfg, files["result"]) + ["--outcome-prefix", str(task.prefix(cfg.run_id()))]
    with open(files["log"], "ab") as log:
        return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, preexec_fn=_child_setup)


def _child_setup() -> None:
    # USR2 is the time-limit warning for task 0 (which decides what to finish), not a reason to die.
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    try:   # a rank never outlives its task
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except OSError:
        pass


def _kill(procs: dict[int, subprocess.Popen] | list[subprocess.Popen]) -> set[int]:
    """Kill and reap; returns the ranks killed."""
    procs = procs if isinstance(procs, dict) else dict(enumerate(procs))
    for p in procs.values():
        p.kill()
    for p in procs.values():
        p.wait()
    return set(procs)


def _rank0_record(task: Task, cfg: RunConfig) -> dict | None:
    path = paths(task.prefix(cfg.run_id()), 0)["result"]
    recs = read_records(path)[0] if path.exists() else []
    return recs[-1] if recs else None


def _own_outcomes(task: Task, run: Running, killed: set[int]) -> None:
    """Other tasks: a rank of ours that died without its outcome gets one from its exit code."""
    for rank, code in run.codes(killed).items():
        out = paths(task.prefix(run.cfg.run_id()), rank)["outcome"]
        if code not in (None, 0) and code not in STOP_SIGNALS and not out.exists():
            write_outcome(out, *silent_exit(rank, code))


def _bare_record(cfg: RunConfig) -> dict:
    from dspbench.facts.build import Outcome, build_record    # imports torch: only on this path
    return build_record(cfg, Outcome("error", ""))


def recorded(path: Path) -> dict[str, str]:
    """run_id -> status of the records in one file (tolerant: a torn line is skipped)."""
    return {r["run_id"]: r["status"] for r in read_records(path)[0]} if Path(path).exists() else {}


def _tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_bytes()[-4000:].decode(errors="replace")
    except OSError:
        return ""
    last = [ln.strip()[:200] for ln in text.splitlines() if ln.strip()][-lines:]
    return " | ".join(last)
