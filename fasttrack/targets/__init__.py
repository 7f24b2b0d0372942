"""Drive the system under test: in-process Python targets and OpenAI-compatible servers."""
