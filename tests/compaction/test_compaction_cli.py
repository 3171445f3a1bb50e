"""compact-topic, compaction-status and consume --read-compacted from the command line."""

from __future__ import annotations

from click.testing import CliRunner

from compactlog.cli.main import main


def test_compact_status_and_read_compacted(tmp_path):
    d = str(tmp_path / "d")
    run = CliRunner()

    def invoke(*args, input=None, code=0):
        res = run.invoke(main, list(args), input=input)
        assert res.exit_code == code, res.output
        return res.output

    invoke("topics", "--data-dir", d, "--create", "--topic", "orders")
    assert "NOT_RUN" in invoke("compaction-status", "--data-dir", d, "--topic", "orders")
    invoke("produce", "--data-dir", d, "--topic", "orders", "--property", "parse.key=true", "--property", "key.separator=:",
           input="a:1\nb:2\na:3\n")
    out = invoke("compact-topic", "--data-dir", d, "--topic", "orders")
    assert "compaction of orders" in out and "3" in out
    status = invoke("compaction-status", "--data-dir", d, "--topic", "orders")
    assert "SUCCESS" in status
    invoke("produce", "--data-dir", d, "--topic", "orders", "--property", "parse.key=true", "--property", "key.separator=:",
           input="b:4\n")
    out = invoke("consume", "--data-dir", d, "--topic", "orders", "--from-beginning", "--read-compacted",
                 "--property", "print.key=true", "--property", "print.offset=true", "--property", "key.separator=:")
    assert out.splitlines() == ["Offset:1:b:2", "Offset:2:a:3", "Offset:3:b:4", "Processed a total of 3 messages"]
    out = invoke("consume", "--data-dir", d, "--topic", "orders", "--from-beginning", "--property", "print.key=true",
                 "--property", "key.separator=:")
    assert out.splitlines() == ["a:1", "b:2", "a:3", "b:4", "Processed a total of 4 messages"], "without the flag: the whole history"
    assert "nope" in invoke("compact-topic", "--data-dir", d, "--topic", "nope", code=1)
