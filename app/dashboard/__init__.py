"""The dashboard: server-rendered pages (Jinja templates in ``frontend/``) with Plotly charts."""
