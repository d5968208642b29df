"""Record files byte by byte: only a newline ends a line (file:line exact), and an append after a torn
tail (a writer killed mid-line) first terminates it, so the new record is never swallowed."""
import json

from dspbench.records.io import SCHEMA_VERSION, append_record, read_records


def rec(rid: str) -> dict:
    return {"schema_version": SCHEMA_VERSION, "run_id": rid, "status": "ok"}


def line(rid: str) -> bytes:
    return (json.dumps(rec(rid)) + "\n").encode()


def test_a_bare_carriage_return_is_no_line_break_and_line_numbers_are_exact(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(line("a") + b"junk\rmore junk\n" + b"\xff\xfe not utf-8\n" + line("b") + b"{broken\n")
    records, problems = read_records(path)
    assert [r["run_id"] for r in records] == ["a", "b"]
    assert [p.split(": ", 1)[0] for p in problems] == [f"{path}:2", f"{path}:3", f"{path}:5"], problems
    assert "not UTF-8" in problems[1]


def test_an_append_after_a_torn_tail_terminates_it_and_says_so(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    path.write_bytes(line("a") + line("b")[:25])          # the writer of b was killed mid-line
    records, problems = read_records(path)
    assert [r["run_id"] for r in records] == ["a"] and "2: corrupt record skipped" in problems[0]
    assert "torn write" in problems[0]
    append_record(path, rec("c"))
    err = capsys.readouterr().err
    assert "data problem" in err and "ended in a torn line" in err
    records, problems = read_records(path)
    assert [r["run_id"] for r in records] == ["a", "c"]    # c was not swallowed by b's torn line
    assert len(problems) == 1 and problems[0].startswith(f"{path}:2: corrupt record skipped")
    append_record(path, rec("d"))                          # a clean tail: no extra line, no message
    assert capsys.readouterr().err == "" and path.read_bytes().count(b"\n") == 4
