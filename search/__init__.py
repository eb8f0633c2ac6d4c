"""Typo-tolerant symbol search over Elasticsearch."""
