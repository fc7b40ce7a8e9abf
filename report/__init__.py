"""The report: a session's data (report.data) and its self-contained HTML page (report.page)."""
