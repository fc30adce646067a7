"""Positions measured on a loaded model: RoPE, ALiBi, learned and no positions, and
RoPE per layer kind."""
