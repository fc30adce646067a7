"""The Mixture of Experts page: ``page.py`` lays out the tabs; routing, balance and cost draw one tab each."""
