"""Mixture of Experts, measured: where a router sends tokens, how evenly, and the tables
the MoE page shows."""
