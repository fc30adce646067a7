"""Analyses of traces: head metrics and detectors, coreference, memory, MoE routing, tradeoffs."""
