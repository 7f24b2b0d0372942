"""Check kinds: one package per kind (``fasttrack/kinds/<kind>/``: how it plans, runs, reads its
measurements, re-derives its status and shows in the reports) behind one protocol
(`fasttrack.kinds.base.Kind`), listed in one plain mapping (`fasttrack.kinds.registry`). Shared
by the kinds: the runner API (`context`), typed measurements (`measurements`, `reading`) and the
pytest session of kernel tests and audits (`pytest_session`)."""
