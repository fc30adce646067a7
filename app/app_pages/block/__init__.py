"""One block, end to end: page.py lays out the page; one module per section."""
