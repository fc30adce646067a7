"""Arrays in, plotly figures out: pure functions with no Streamlit, tested as plain functions."""
