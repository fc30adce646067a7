"""The Positions page: ``page.py`` lays out the tabs; each scheme's tab is one module here (rope,
rope_scaling, alibi, learned, no_positions, permutation), drawing what ``view.PositionsView`` holds."""
