"""Positions measured on a loaded model (seed §3): RoPE, ALiBi, learned and no positions, and
RoPE per layer kind."""
