"""The layout every PNG of `stats` and `eval` shares, and the check that nothing is clipped.

One to N panels, one legend for all of them below the panels (outside every axes, so it
never covers an axis label), a title wrapped to the figure's width. The legend's column
count and the title's line breaks are measured with the renderer, not guessed from
character counts, so a long model name or a one-panel figure still fits.
Only called after matplotlib is imported (it is an optional extra).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# Narrower than this, a panel's tick labels and a legend column do not fit side by side.
MIN_FIGURE_WIDTH_IN = 6.4


def panels(
    n: int, *, panel_w: float = 4.2, panel_h: float = 3.6, max_cols: int = 4
) -> tuple[Figure, list[Axes]]:
    """A figure with `n` panels in a grid of at most `max_cols` columns (constrained layout)."""
    import matplotlib.pyplot as plt

    n = max(1, n)
    cols = min(max_cols, n)
    rows = math.ceil(n / cols)
    width = max(MIN_FIGURE_WIDTH_IN, panel_w * cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(width, panel_h * rows + 1.2), squeeze=False, layout="constrained"
    )
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.axis("off")
    return fig, flat[:n]


def _fits(fig: Figure, artist: Any) -> bool:
    fig.canvas.draw()  # lay out first: extents are only true after a draw
    box = artist.get_window_extent()
    full = fig.bbox
    return bool(box.x0 >= full.x0 - 0.5 and box.x1 <= full.x1 + 0.5)


def finish(fig: Figure, axes: Sequence[Axes], title: str, *, fontsize: float = 10) -> None:
    """One legend for all panels below them, in as many columns as fit; the title wrapped."""
    handles: list[Any] = []
    labels: list[str] = []
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels and not label.startswith("_"):
                handles.append(h)
                labels.append(label)
    if handles:
        for ncol in range(len(labels), 0, -1):
            legend = fig.legend(
                handles, labels, loc="outside lower center", ncol=ncol, fontsize=8, frameon=False
            )
            if ncol == 1 or _fits(fig, legend):
                break
            legend.remove()
    # Wrap at the widest line that fits: start from an estimate, narrow until it does.
    width = max(20, int(fig.get_figwidth() * 72 / (0.55 * fontsize)))
    while True:
        text = fig.suptitle(textwrap.fill(title, width=width), fontsize=fontsize)
        if width <= 20 or _fits(fig, text):
            break
        width -= 4


def problems(fig: Figure) -> list[str]:
    """What lies outside the figure or on top of a panel's labels, after layout.

    Tests render every plot at the size users get and require this to be empty.
    """
    fig.canvas.draw()
    full = fig.bbox
    out: list[str] = []

    def outside(name: str, artist: Any) -> None:
        b = artist.get_window_extent()
        if b.width == 0 or b.height == 0:
            return
        if b.x0 < full.x0 - 1 or b.x1 > full.x1 + 1 or b.y0 < full.y0 - 1 or b.y1 > full.y1 + 1:
            out.append(f"{name} outside the figure: {b.bounds} not in {full.bounds}")

    texts: list[tuple[str, Any]] = []
    title = getattr(fig, "_suptitle", None)  # matplotlib has no public getter of the artist
    if title is not None:
        texts.append(("title", title))
    for i, legend in enumerate(fig.legends):
        texts.append((f"legend {i}", legend))
    for i, ax in enumerate(fig.axes):
        if not ax.axison:
            continue
        texts += [
            (f"panel {i} title", ax.title),
            (f"panel {i} x label", ax.xaxis.label),
            (f"panel {i} y label", ax.yaxis.label),
        ]
        if ax.get_legend() is not None:
            texts.append((f"panel {i} legend", ax.get_legend()))
        lo, hi = sorted(ax.get_xlim())
        texts += [
            (f"panel {i} tick {t.label1.get_text()!r}", t.label1)
            for t in ax.xaxis.get_major_ticks()
            if lo <= t.get_loc() <= hi  # matplotlib keeps ticks beyond the view, unseen
        ]
    for name, artist in texts:
        if artist.get_visible() and (not hasattr(artist, "get_text") or artist.get_text()):
            outside(name, artist)
    # A figure legend must not sit on any panel's labels (the bug: drawn over the x label).
    for i, legend in enumerate(fig.legends):
        lb = legend.get_window_extent()
        for j, ax in enumerate(fig.axes):
            if not ax.axison:
                continue
            for what, artist in (("x label", ax.xaxis.label), ("plot area", ax.patch)):
                ab = artist.get_window_extent()
                if ab.width and ab.height and lb.overlaps(ab):
                    out.append(f"legend {i} overlaps panel {j}'s {what}")
    return out
