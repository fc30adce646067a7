"""Mixture of Experts, measured (seed §4.2): where a router sends tokens, how evenly, and the tables
the MoE page shows."""
