"""Self-contained HTML (and later Markdown/CSV) reports rendered with jinja2."""
