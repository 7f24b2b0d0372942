"""Reports rendered from evidence: HTML, Markdown, JUnit, dashboard, CI annotations."""
