"""See a model: the live web viewer (python -m gsexp.view), its training hook (live.py), and
what both load (source.py). viser is imported only when a viewer starts."""
