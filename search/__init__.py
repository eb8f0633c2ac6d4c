"""Typo-tolerant symbol search over Elasticsearch (issue #6)."""
