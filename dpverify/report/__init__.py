"""Reports: ``report.json`` (versioned schema), and the Markdown and self-contained HTML
reports a reviewer reads, grouped by paper, with figures.

* :func:`report_dict`, :func:`write_reports`: what ``dpverify run`` writes;
* :func:`load_report`, :func:`compare_baseline`: the regression gate (``--baseline``);
* :func:`merge_reports`: one report from those of separate runs (``dpverify report A B``);
* :func:`build_document`, :func:`render_markdown`, :func:`render_html`: the reviewer's
  view of a saved report (``dpverify report``).
"""

from dpverify.report.html import render_html
from dpverify.report.io import write_json_atomic, write_text_atomic
from dpverify.report.markdown import render_markdown
from dpverify.report.merge import merge_reports
from dpverify.report.paper import build_document
from dpverify.report.writer import (
    compare_baseline,
    load_report,
    report_dict,
    write_rendered,
    write_reports,
)

__all__ = ["build_document", "compare_baseline", "load_report", "render_html",
           "merge_reports", "render_markdown", "report_dict", "write_json_atomic", "write_rendered",
           "write_reports", "write_text_atomic"]
