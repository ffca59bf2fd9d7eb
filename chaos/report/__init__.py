"""Reports of a chaos run: JSON for machines, a text summary for people, an HTML picture."""

from chaos.report.writer import summary, write_report

__all__ = ["summary", "write_report"]
