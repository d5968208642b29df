"""Result records: flat, self-describing JSON lines, appended atomically, read tolerantly.

A record is `{schema_version, run_id, status, error, **config, **model facts, **metrics, environ}`.
Fields (units in the name where it matters):
- identity/config: run_id, method, model, batch (per DP replica), frames (T), spatial (S),
  hidden, depth, heads, params, world_size, sp, dp, mode, dtype, backend, grad_ckpt, shard,
  sample_steps, warmup, iters, seed, repeat, launcher, a2a (single | list), zero (0 | 1 | 2), cfg,
  pad (auto | never), cfg_parallel (cond and uncond passes on two halves of the world),
  ulysses_degree (usp's Ulysses degree; 0: the default split), mem_budget_mib (these enter the
  run_id only when not at their default); bucket_weight (a bucketed
  sweep's share of the samples for this shape, 0 otherwise), video (the FxHxW that T, S came
  from) and shard_auto (why the shard was chosen when --shard was not given, bench/facts/shard.py;
  "" otherwise) are not in the run_id;
- method_meta {label, colour, order, table3 {formula, coeff, per_n}}: how reports show the method,
  as its MethodSpec declares it (`report`; null fields: the report's defaults), so that a report
  needs no table of methods and a plugin's records show its look without the plugin;
- padding (methods/padding.py, analytic): padded_frames, padded_spatial (what the method ran),
  pad_token_share, pad_attn_share, pad_comm_share (the pads' share of tokens, of attention's
  query x key work, of the step's SP wire bytes; null where the method cannot run the shape);
- status: ok | unsupported | oom | timeout | error, `error` (message, naming the failing rank);
- timing: step_time_median_s, step_time_p10_s, step_time_p90_s, step_times_s (per timed iteration,
  max over ranks); samples_per_s and tokens_per_s (global batch, tokens = B*T*S per sample);
  mfu (model FLOPs, 3x forward in training / exact-SKU device peak; null where unknown, e.g. CPU),
  hfu and hardware_flops_per_step (with checkpointing's recompute), flops_per_step;
  attn_kernel {"sdpa": backend, "ring_block": kernel};
- sampling (sample mode; null otherwise): s_per_video (median loop time / global batch: seconds of
  the K-step loop per video), s_per_sample_step (median / K), sampler (ddim | flow), cfg_guidance
  (none | batch | parallel), sample_timed_loop (what the timed loop holds: the denoising steps only,
  text encoder and VAE outside it);
- memory: peak_mem_bytes (max over ranks), peak_mem_bytes_per_rank (the timed steps' peak: reset
  after the oracle and the warm-up, peak_mem_reset), mem_base_bytes_per_rank, mem_run_bytes (the
  most a rank added over its base), mem_model (the memory model's bytes by part for this config),
  mem_peak_step (what the peak is: on CPU glibc's live heap bytes at most, sampled per operation
  of an untimed step after the timed ones, as a device allocator's peak counts live bytes, not
  what the heap kept of earlier transients), rss_run_bytes (CPU: the timed steps' resident peak
  over the resident size before the model);
- engine_comm {"tag/op.phase": bytes}: under --zero 1|2, DeepSpeed's own collectives as its engine
  issued them in the instrumented step (rank 0's engine ledger, methods/comm/external.py: the gradient
  bucket all-reduce zero_grads, the norm zero_norm, the parameter all-gather zero_params), apart from
  the method's comm; engine_comm_formula the formula (cost/comm.py engine_ops) and
  engine_comm_formula_match whether every rank's engine ledger equals it; engine_comm_time_s
  {"op.phase": seconds} from the instrumented step (records before this held the formula in engine_comm);
- communication (per rank per step, wire bytes, nccl-tests convention): comm_wire_bytes, comm
  {"op.phase": bytes}, comm_tagged {"tag/op.phase": bytes}, comm_formula_match (ledger == formula),
  comm_time_s {"op.phase": seconds, from a separate instrumented iteration};
  comm_formula {"tag/op.phase": bytes}: the method's analytic formula the ledger was checked against
  (recorded so that reports judge a record by the formula of the code that ran it);
- losses (train: per iteration, warm-up included; null otherwise);
- oracle_max_abs_err: a float, the max abs error against the single-device oracle over the output,
  the input gradient and every parameter gradient (null when not checked); oracle_errors: the
  per-part detail {"output", "grads", "input_grad", "shape", "depth"};
- source: measured | predicted | synthetic | published: where the numbers came from (a `predict` record is
  `predicted` whatever its status: a predicted `oom` is not a measured one; a `published` record is a
  cited publication's number, bench/cost/published.py: `published` {citation, framework, software,
  configuration, split, ...}, `time_includes` end_to_end | dit_only, `model_approximated`);
- environ: git sha and dirty flag, dspbench, torch, CUDA/NCCL versions, device names, hostnames,
  python, CPU, threads.
"""
from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

try:                 # 5-6x faster to parse (a report reads 10,000 records); the reports extra has it
    from orjson import JSONDecodeError, loads
except ImportError:  # the standard library parses the same JSON
    from json import JSONDecodeError, loads

SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)   # version 1 records are upgraded on read (upgrade())
RESULT_OPEN, RESULT_CLOSE = "<RESULT>", "</RESULT>"


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """Write then rename in the same folder: a reader, on this node or another, sees the old file or
    the whole new one, never half (heartbeats, outcomes, the rendezvous port, manifests). The
    temporary name is hidden and ends in .tmp, so no glob of the real names picks it up."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def append_record(path: str | os.PathLike, record: dict) -> None:
    """Append one line with a single write(2) on an O_APPEND descriptor, then fsync.

    The kernel performs a regular-file write as one unit and a signal cannot split it, so a killed
    writer leaves either the whole line or nothing; concurrent appenders never interleave. A file that
    ends without a newline anyway (a crash of the machine, a full disk, an NFS client, another tool)
    has a torn last line: the append terminates it first, so the new record stays a line of its own,
    and says so on stderr (readers report the torn line, file:line, as corrupt).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(record, sort_keys=True, default=str) + "\n").encode()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            print(f"dspbench: data problem: {path} ended in a torn line (no newline after byte {size}); "
                  "terminated it before appending a record", file=sys.stderr)
            data = b"\n" + data
        written = os.write(fd, data)
        if written != len(data):
            raise OSError(f"short write to {path}: {written} of {len(data)} bytes")
        os.fsync(fd)
    finally:
        os.close(fd)


def result_line(record: dict) -> str:
    return f"{RESULT_OPEN}{json.dumps(record, sort_keys=True, default=str)}{RESULT_CLOSE}"


def read_records(path: str | os.PathLike, lines: bool = False) -> tuple[list[dict], list[str]]:
    """(records, problems): corrupt or truncated lines are reported with file:line and skipped.
    `lines`: each record gains `_line`, its 1-based line in the file (reports link to it).

    Read as bytes and split on newline bytes only: a bare carriage return (or any other byte) inside a
    corrupt line is no line break, so every file:line is the line `sed -n Np` shows. A last line
    without its newline is torn (a killed writer) unless it is a whole record."""
    records, problems = [], []
    chunks = Path(path).read_bytes().split(b"\n")
    for lineno, raw in enumerate(chunks, 1):
        if not raw.strip():
            continue
        torn = " (the last line, without a newline: a torn write)" if lineno == len(chunks) else ""
        try:
            rec = loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            problems.append(f"{path}:{lineno}: corrupt record skipped (not UTF-8){torn}")
            continue
        except (JSONDecodeError, ValueError) as e:
            reason = getattr(e, "msg", None) or str(e).split(":")[0]   # json and orjson alike
            problems.append(f"{path}:{lineno}: corrupt record skipped ({reason}){torn}")
            continue
        if not isinstance(rec, dict) or "run_id" not in rec or "status" not in rec:
            problems.append(f"{path}:{lineno}: not a dspbench record (no run_id/status), skipped")
            continue
        if rec.get("schema_version") not in READABLE_VERSIONS:
            problems.append(f"{path}:{lineno}: schema_version {rec.get('schema_version')!r} not in "
                            f"{READABLE_VERSIONS}, skipped")
            continue
        rec = upgrade(rec)
        if lines:
            rec["_line"] = lineno
        records.append(rec)
    return records, problems


def upgrade(rec: dict) -> dict:
    """A version 1 record in version 2 form: `source` measured (predict then wrote status
    `predicted`, so that status says it), the oracle error a float with its parts beside it."""
    if rec.get("schema_version") == SCHEMA_VERSION:
        return rec
    rec = dict(rec)
    rec.setdefault("source", "predicted" if rec.get("status") == "predicted" or rec.get("hardware_profile")
                   else "measured")
    parts = rec.get("oracle_max_abs_err")
    if isinstance(parts, dict):
        rec["oracle_errors"] = parts
        rec["oracle_max_abs_err"] = max(v for k, v in parts.items() if k in ("output", "grads", "input_grad"))
    rec.setdefault("comm_formula", None)
    rec["schema_version"] = SCHEMA_VERSION
    return rec


def read_dir(root: str | os.PathLike) -> tuple[list[dict], list[str]]:
    """All records under `root` (any depth, *.jsonl), with problems."""
    records, problems = [], []
    for path in sorted(Path(root).rglob("*.jsonl")):
        r, p = read_records(path)
        records += r
        problems += p
    return records, problems


def default_records_file(out_dir: str | os.PathLike) -> Path:
    """One file per writing process: no two writers ever share a file (NFS-safe)."""
    return Path(out_dir) / f"records-{socket.gethostname()}-{os.getpid()}.jsonl"
