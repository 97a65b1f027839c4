"""The fleet through Prometheus: PromQL (queries, promql), client, decode, fleet model, source."""
