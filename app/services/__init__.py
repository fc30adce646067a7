"""What the app computes, without Streamlit: each module takes the loaded model (or what it needs),
the ``Limits`` in force and a progress callback, and returns plain results. app/cache.py keeps them
(``st.cache_*`` and the stores shared by every session); the pages call app/cache.py."""
