"""Custom Streamlit components of the app (plain JavaScript, no build step)."""
