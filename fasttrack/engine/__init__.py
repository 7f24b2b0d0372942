"""The engine: runs a plan (run, setup, select, jobs, worker, writer, merge, signals, progress)
with isolation, timeouts, interruption and resume, and returns evidence. It renders nothing:
the CLI hands the evidence to `fasttrack.report`."""
