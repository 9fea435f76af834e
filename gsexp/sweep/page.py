"""The dashboard's index.html: what the sweep measured (scene, iterations, device, backend), the
plots, results.md's tables (mean ± std over seeds included), each run linked with its renders
(ground truth | render | error of its first test view), then every job's raw row.
No external resources: it opens from a file or a wandb artifact alike."""
from __future__ import annotations

import html
import os
from pathlib import Path

from gsexp.sweep.results import columns, fmt, tables

STYLE = """body{font-family:sans-serif;margin:1.5em;max-width:1400px} table{border-collapse:collapse;font-size:12px}
td,th{border:1px solid #ccc;padding:2px 6px} tr.failed,tr.missing{background:#fdd} tr.invalid{background:#eee}
img{max-width:100%} figure{margin:1em 0} .runs img{height:64px;image-rendering:pixelated} .context{color:#444}"""


def cell(value) -> str:
    text = fmt(value) if isinstance(value, float) else ("–" if value is None else str(value))
    return f"<td>{html.escape(text)}</td>"


def table(head: list[str], rows: list[list], raw: bool = False) -> str:
    """An HTML table; raw cells are HTML already (links, images)."""
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" if raw else cell(c) for c in row) + "</tr>" for row in rows)
    return "<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + f"</tr>{body}</table>"


def first_comparison(renders: Path) -> Path | None:
    """The first test view's ground truth | render | error image, else its render."""
    for pattern in ("test_*_compare.png", "test_*.png", "*.png"):
        found = sorted(renders.glob(pattern))
        if found:
            return found[0]
    return None


def run_links(rows: list[dict], sweep_dir: Path | None, out: Path) -> str:
    """One line per job whose folder is here: a link to it, to its renders and summary."""
    lines = []
    for r in rows:
        job = sweep_dir / str(r.get("dir") or "") if sweep_dir and r.get("dir") else None
        if job is None or not job.is_dir():
            continue
        rel = Path(os.path.relpath(job, out)).as_posix()
        links = [f'<a href="{html.escape(rel)}/">{html.escape(str(r["dir"]))}</a>']
        for name in ("summary.json", "train.log", "metrics.jsonl"):
            if (job / name).exists():
                links.append(f'<a href="{html.escape(rel)}/{name}">{name}</a>')
        picture = first_comparison(job / "renders") if (job / "renders").is_dir() else None
        if picture is not None:
            src = html.escape(f"{rel}/renders/{picture.name}")
            links.append(f'<a href="{html.escape(rel)}/renders/">renders</a>')
            links.append(f'<a href="{src}"><img src="{src}" alt="{html.escape(picture.name)}"></a>')
        lines.append([html.escape(str(r.get("job"))), html.escape(str(r.get("variant"))),
                      html.escape(str(r.get("status"))), " · ".join(links)])
    if not lines:
        return "<p>The job folders are not beside this page; the table above has every run.</p>"
    return ("<p>Images: ground truth | render | error of the first test view (error = mean |render − gt| × 4, "
            "black = exact).</p><div class='runs'>" + table(["job", "variant", "status", "links"], lines, raw=True)
            + "</div>")


def write_html(rows: list[dict], out: Path, title: str, plots=(), context: str = "",
               sweep_dir: Path | None = None) -> Path:
    sections = "".join((f"<h2>{html.escape(name)}</h2>" if name else "<h2>Finished jobs</h2>") + table(head, cells)
                       for name, head, cells in tables(rows))
    cols = [c for c in columns(rows) if c != "dir"]
    raw = "".join("<tr class='{}'>".format(html.escape(str(r.get("status")))) + "".join(cell(r.get(c)) for c in cols)
                  + "</tr>" for r in rows)
    images = "".join(f'<figure><img src="{name}" alt="{name}"><figcaption>{name}</figcaption></figure>'
                     for name in plots)
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{STYLE}</style></head>
<body><h1>{html.escape(title)}</h1>
<p class="context">{html.escape(context)}</p>
<p>{len(rows)} jobs, {sum(r.get('status') == 'ok' for r in rows)} ok.</p>
{images}
{sections}
<h2>Runs and renders</h2>{run_links(rows, sweep_dir, out)}
<h2>All jobs</h2><table><tr>{''.join(f'<th>{html.escape(c)}</th>' for c in cols)}</tr>{raw}</table>
</body></html>
"""
    path = out / "index.html"
    path.write_text(page)
    return path
