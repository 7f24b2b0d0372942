"""#35 row 10: a check's output log is capped, its head and tail kept, the printed size said."""

from __future__ import annotations

from fasttrack.process.logcap import cap_log, read_tail


def test_a_large_log_keeps_its_head_and_tail_and_says_how_much_was_printed(tmp_path):
    log = tmp_path / "pytest.log"
    log.write_bytes(b"HEAD\n" + b"x" * 5000 + b"\nFAILED tests/test_k.py::test_a - boom\n")
    size = log.stat().st_size
    assert cap_log(log, limit=1000, head=100) == size
    data = log.read_bytes()
    assert data.startswith(b"HEAD\n") and data.endswith(b"FAILED tests/test_k.py::test_a - boom\n")
    assert f"the output was {size} bytes".encode() in data and len(data) < 1200
    assert read_tail(log, 40).endswith("test_a - boom\n")


def test_a_small_log_is_left_alone(tmp_path):
    log = tmp_path / "pytest.log"
    log.write_bytes(b"ok\n")
    assert cap_log(log, limit=1000, head=100) == 3 and log.read_bytes() == b"ok\n"
