"""The cluster view's two HTML pages (the fleet, one cluster): server-rendered shells whose script fetches the JSON
of ``fleet_view.app`` every few seconds and draws it. No build step, no framework: one file of plain HTML, CSS
and JavaScript (every value is put in the page as text, never as HTML).

Airflow shows the page in an iframe of its own UI (``external_views``); links to a DAG run open in Airflow's UI
around it (the iframe's sandbox allows no top-level navigation, so the script moves the parent's router instead,
which is same-origin), links between the view's own pages stay in the iframe.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

#: The page's style and script (one file each beside this module, read once).
_STYLE = Path(__file__).with_name("view.css").read_text()
_SCRIPT = Path(__file__).with_name("view.js").read_text()


def render(*, kind: str, title: str, api_url: str, refresh_s: float, back_url: str | None = None) -> str:
    """The page: ``kind`` ``"fleet"`` or ``"cluster"``; ``api_url`` the JSON it draws, fetched every ``refresh_s``
    seconds; ``back_url`` a link back to the fleet."""
    cfg = json.dumps({"kind": kind, "api": api_url, "refresh_s": refresh_s}).replace("</", "<\\/")
    back = f'<p><a href="{html.escape(back_url)}">all clusters</a></p>' if back_url else ""
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>{back}"
            f"<div id='main'><p class='muted'>reading...</p></div><div id='footer' class='muted'></div>"
            f"<script type='application/json' id='cfg'>{cfg}</script><script>{_SCRIPT}</script></body></html>")


def message(title: str, text: str, back_url: str | None = None) -> str:
    """A page with one sentence (a run that names no cluster)."""
    back = f'<p><a href="{html.escape(back_url)}">all clusters</a></p>' if back_url else ""
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1><p>{html.escape(text)}</p>{back}"
            "</body></html>")

