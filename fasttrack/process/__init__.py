"""The processes of a run, in one place: how they start (``subprocess.Popen``, or forked from the
pre-imported zygote), how the engine waits for them with a timeout, how a whole process group is
stopped, how a server's readiness is awaited, and the guard that stops a target server when the
process that started it dies.

- `fasttrack.process.logged`: run a command with its output in a log, timed out and group-killed;
  the table of a run's live processes (`Processes`), which the engine stops on Ctrl-C;
- `fasttrack.process.groups`: facts about process groups and stopping them;
- `fasttrack.process.zygote`: the zygote, one pluggable way of starting (`Forker`);
- `fasttrack.process.guard`: no target server outlives its run;
- `fasttrack.process.ready`: a free port and waiting until a server answers;
- `fasttrack.process.cpu`: what a process at a cpu scope point sees (no accelerator, one thread).

This package imports nothing of fasttrack's but the evidence's `Artifact` (a process's log).
"""
