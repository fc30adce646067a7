"""Streamlit pieces every page shares: the sidebar (model, prompt, BOS policy), the URL-backed state,
small widgets and the progress bar that services report to."""
