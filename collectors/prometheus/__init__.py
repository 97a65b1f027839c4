"""The fleet through Prometheus: its PromQL (queries, promql), its HTTP client, its source."""
