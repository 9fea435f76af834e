"""Point labels that stay readable on a scatter plot. Points that sit on each other share one
label, one line per variant. Each label takes the first place around its point, in widening
rings, where it covers no other label or point and stays inside the axes. A label with no such
place is replaced by its point's number, and the caller prints a key of the numbers."""
from __future__ import annotations

MERGE_PX = 5.0   # points closer than this on screen are one point to the eye
MARKER_PX = 5.0  # half the size of a marker, kept clear of labels
RINGS = 10


def _boxes_overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def merge_close(ax, points: list[tuple]) -> list[tuple[float, float, list[str], list[str]]]:
    """Group points within MERGE_PX of each other on screen: (x, y, labels, tags) per group."""
    to_px = ax.transData.transform
    groups: list[tuple] = []
    for x, y, text, tag in points:
        px = tuple(to_px((x, y)))
        for gx, gy, texts, tags, gpx in groups:
            if abs(gpx[0] - px[0]) <= MERGE_PX and abs(gpx[1] - px[1]) <= MERGE_PX:
                texts.append(text)
                tags.append(tag)
                break
        else:
            groups.append((x, y, [text], [tag], px))
    return [(x, y, texts, tags) for x, y, texts, tags, _ in groups]


def _candidates(width: float, height: float):
    """Offsets (dx, dy) of a label's lower-left corner from its point, in pixels, nearest first."""
    for ring in range(RINGS):
        gap = 6 + ring * (height + 4)
        yield gap, 3 + ring * 4                          # right, above
        yield gap, -height - 3 - ring * 4                # right, below
        yield -gap - width, 3 + ring * 4                 # left, above
        yield -gap - width, -height - 3 - ring * 4       # left, below
        yield -width / 2, gap                            # above
        yield -width / 2, -gap - height                  # below


def _free_spot(centre, size, taken, frame):
    """(dx, dy, box, cost) of the best candidate; cost 0: it overlaps nothing, inside the axes."""
    best = None
    for dx, dy in _candidates(*size):
        box = (centre[0] + dx, centre[1] + dy, centre[0] + dx + size[0], centre[1] + dy + size[1])
        cost = sum(_boxes_overlap(box, t) for t in taken)
        cost += 10 * (box[0] < frame.x0 or box[2] > frame.x1 or box[1] < frame.y0 or box[3] > frame.y1)
        if best is None or cost < best[3]:
            best = (dx, dy, box, cost)
        if cost == 0:
            break
    return best


def place_labels(ax, points: list[tuple], fontsize: float = 7.0) -> list[str]:
    """Annotate `points` (x, y, label, tag) on `ax`; a label placed away from its point gets a
    thin leader line. Returns the tags drawn in place of labels that found no room: the caller
    prints their key. Call after the axes' limits and layout are final."""
    fig = ax.figure
    scale, renderer = fig.dpi / 72.0, fig.canvas.get_renderer()
    groups = merge_close(ax, points)
    centres = [tuple(ax.transData.transform((x, y))) for x, y, _, _ in groups]
    taken = [(cx - MARKER_PX, cy - MARKER_PX, cx + MARKER_PX, cy + MARKER_PX) for cx, cy in centres]
    frame, keyed = ax.get_window_extent(), []

    def size_of(text):
        probe = ax.text(0, 0, text, fontsize=fontsize, linespacing=1.1)  # measured, not guessed
        box = probe.get_window_extent(renderer)
        probe.remove()
        return box.width + 2, box.height + 2

    for (x, y, texts, tags), centre in zip(groups, centres):
        text = "\n".join(texts)
        size = size_of(text)
        dx, dy, box, cost = _free_spot(centre, size, taken, frame)
        if cost > 0:  # no room for the words: the number, and a key under the plot
            text = ",".join(tags)
            keyed += tags
            size = size_of(text)
            dx, dy, box, cost = _free_spot(centre, size, taken, frame)
        taken.append(box)
        far = abs(dx) > 8 + size[0] or abs(dy) > 8 + size[1] or max(abs(dx), abs(dy)) > 14
        ax.annotate(text, (x, y), xytext=(dx / scale, dy / scale), textcoords="offset points", fontsize=fontsize,
                    ha="left", va="bottom", linespacing=1.1,
                    arrowprops={"arrowstyle": "-", "color": "0.5", "lw": 0.6} if far else None)
    return keyed
