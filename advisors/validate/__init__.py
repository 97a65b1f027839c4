"""Guided pre-production validation: host and cluster checks, response curve, peering time,
CPU scaling; each step measured on the real cluster and judged against KNOWLEDGE.md."""
