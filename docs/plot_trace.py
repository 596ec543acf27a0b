"""Render a Chrome trace file (wgc.Timeline.save_trace, Model.profile(trace=...)) as a PNG:
one row per track, one bar per complete event. The docs' trace pictures are made with it:

    python docs/plot_trace.py timeline.json docs/images/timeline_trace.png
"""

from __future__ import annotations

import argparse
import json


def plot_trace(trace: str, png: str, title: str | None = None) -> str:
    """Draw ``trace``'s "X" events into ``png`` (rows: its processes' tracks, in their sort
    order; colours: one per event name, or per category when there are more than 20 names)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(trace, encoding="utf-8") as f:
        events = json.load(f)["traceEvents"]
    meta = [e for e in events if e["ph"] == "M"]
    xs = [e for e in events if e["ph"] == "X"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    order = {(e["pid"], e["tid"]): e["args"]["sort_index"] for e in meta
             if e["name"] == "thread_sort_index"}
    tracks = sorted({(e["pid"], e["tid"]) for e in xs}, key=lambda t: (t[0], order.get(t, t[1])))
    key = "name" if len({e["name"] for e in xs}) <= 20 else "cat"
    groups = list(dict.fromkeys(e.get(key, e["name"]) for e in xs))
    colours = {g: plt.cm.tab20(i % 20) for i, g in enumerate(groups)}

    fig, ax = plt.subplots(figsize=(10, 0.9 + 0.45 * len(tracks)))
    for e in xs:
        g = e.get(key, e["name"])
        ax.barh(tracks.index((e["pid"], e["tid"])), e["dur"] / 1e3, left=e["ts"] / 1e3,
                height=0.7, color=colours[g], edgecolor="white", linewidth=0.5, label=g)
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles, strict=True))
    ax.legend(uniq.values(), uniq.keys(), fontsize=7, ncol=max(1, len(uniq) // 8),
              loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_yticks(range(len(tracks)), [names.get(t, f"track {t[1]}") for t in tracks])
    ax.invert_yaxis()
    ax.set_xlabel("ms")
    process = next((e["args"]["name"] for e in meta if e["name"] == "process_name"), "")
    ax.set_title(title or process, fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(png, dpi=80)
    plt.close(fig)
    return png


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", help="a Chrome trace JSON file")
    ap.add_argument("png", help="the PNG to write")
    ap.add_argument("--title", default=None)
    args = ap.parse_args()
    print(plot_trace(args.trace, args.png, args.title))
