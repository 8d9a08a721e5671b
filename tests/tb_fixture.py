#!/usr/bin/env python3
"""tb_fixture.py -- writes tests/fixtures/tb/scalars.tfevents with TensorBoard's
own protobuf classes and record writer, then a SessionLog START at step 9 (the reference for libtrain/tbevents.c;
test_tbevents writes the same events and compares bytes).  Needs the
`tensorboard` package (the reference venv: /opt/hfref/bin/python).  The events
(tag, step, value, wall time) are the table TB_CASES in tests/test_tbevents.c.
    python3 tests/tb_fixture.py OUT.tfevents"""
import sys
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.record_writer import RecordWriter

CASES = [("train/loss", 1, 2.5, 1700000000.25), ("train/lr", 1, 3e-4, 1700000000.25),
         ("train/grad_norm", 0, 0.0, 1700000001.0), ("perf/tokens_per_s", 200, 12345.6, 1700000002.5),
         ("memory/peak_bytes", 300, 1.5e9, 1700000003.75), ("train/loss", 70000, -1.25, 1700000004.0),
         ("eval/val_loss", 2147483648, 7.0, 1700000005.125)]
WALL0 = 1700000000.0

def main(out):
    with open(out, "wb") as f:
        w = RecordWriter(f)
        w.write(event_pb2.Event(wall_time=WALL0, file_version="brain.Event:2").SerializeToString())
        for tag, step, v, wall in CASES:
            s = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=v)])
            w.write(event_pb2.Event(wall_time=wall, step=step, summary=s).SerializeToString())
        # a restart marker (a resumed run's first event after the file version)
        w.write(event_pb2.Event(wall_time=1700000006.5, step=9,
                                session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START)).SerializeToString())
        w.flush()

if __name__ == "__main__":
    main(sys.argv[1])
