"""Reports: ``report.json`` (versioned schema) and human-readable Markdown/HTML."""

from dpverify.report.io import write_json_atomic, write_text_atomic

__all__ = ["write_json_atomic", "write_text_atomic"]
