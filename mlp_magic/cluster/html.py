"""HTML faces of the cluster: what nbconvert keeps of the widget, and the widget's own pieces.

Pure: inline styles only (no JavaScript, no stylesheet), every piece of text escaped.
"""
from __future__ import annotations

import html
from typing import Any

from mlp_magic.gpu import HostGpus, nearest_nic
from mlp_magic.cluster.pure.model import ClusterState, HostView
from mlp_magic.cluster.text import host_rows, title

# Link colours: NVLink in greens (darker = more links), PCIe within a socket in blues and
# yellow, crossing host bridges in orange, crossing the socket (SYS) in red.
LINK_COLOURS = {
    "X": ("#e0e0e0", "#555555"), "NV-": ("#a5d6a7", "#1b1b1b"), "NV": ("#43a047", "#ffffff"),
    "NV+": ("#1b5e20", "#ffffff"), "PIX": ("#90caf9", "#1b1b1b"), "PXB": ("#bbdefb", "#1b1b1b"),
    "PHB": ("#fff59d", "#1b1b1b"), "NODE": ("#ffcc80", "#1b1b1b"), "SYS": ("#ef9a9a", "#1b1b1b"),
}
LEGEND = [("NV#", "NV", "NVLink, # links bonded"), ("PIX", "PIX", "one PCIe switch"),
          ("PXB", "PXB", "several PCIe switches"), ("PHB", "PHB", "through the CPU's host bridge"),
          ("NODE", "NODE", "across host bridges, same NUMA node"), ("SYS", "SYS", "across the CPU socket")]


def link_colours(link: str | None) -> tuple:
    """(background, text colour) of a matrix cell."""
    if link is None:
        return "#ffffff", "#999999"
    if link.startswith("NV"):
        count = int(link[2:])
        return LINK_COLOURS["NV-" if count < 2 else "NV" if count < 8 else "NV+"]
    return LINK_COLOURS.get(link, ("#ffffff", "#1b1b1b"))


def link_cell_html(link: str | None) -> str:
    background, colour = link_colours(link)
    return ('<div class="mlp-link" style="background:%s;color:%s;text-align:center;padding:2px 4px;'
            'font-family:monospace">%s</div>' % (background, colour, html.escape(link or "?")))


def legend_html() -> str:
    swatches = "".join('<span style="display:inline-block;margin-right:10px">%s %s</span>'
                       % (_swatch(sample, name), html.escape(meaning)) for name, sample, meaning in LEGEND)
    return '<div class="mlp-legend" style="font-size:90%%">%s</div>' % swatches


def _swatch(sample: str, name: str) -> str:
    background, colour = link_colours("NV4" if sample == "NV" else sample)
    return ('<span style="background:%s;color:%s;padding:1px 6px;font-family:monospace">%s</span>'
            % (background, colour, html.escape(name)))


def table_html(rows: list[list[str]], css_class: str) -> str:
    head = "".join("<th style=\"text-align:left;padding:2px 8px\">%s</th>" % html.escape(c) for c in rows[0])
    cell = "<td style=\"padding:2px 8px\">%s</td>"
    body = "".join("<tr>%s</tr>" % "".join(cell % html.escape(c) for c in row) for row in rows[1:])
    return '<table class="%s"><thead><tr>%s</tr></thead><tbody>%s</tbody></table>' % (css_class, head, body)


def matrix_html(gpus: HostGpus) -> str:
    devices = gpus.devices()
    head = "<tr><th></th>%s</tr>" % "".join(
        "<th style=\"padding:2px 4px\">%s</th>" % html.escape(d) for d in devices)
    rows = "".join("<tr><th style=\"text-align:left;padding:2px 4px\">%s</th>%s</tr>" % (
        html.escape(a), "".join("<td style=\"padding:1px\">%s</td>" % link_cell_html(gpus.link(a, b))
                                for b in devices)) for a in devices)
    return '<table class="mlp-matrix" style="border-collapse:collapse">%s%s</table>' % (head, rows)


def bar_html(fraction: float | None, label: str, colour: str = "#42a5f5") -> str:
    width = 0 if fraction is None else max(0.0, min(1.0, fraction)) * 100
    return ('<span class="mlp-bar" style="display:inline-block;width:120px;height:10px;background:#eeeeee;'
            'vertical-align:middle"><span style="display:block;width:%.0f%%;height:10px;background:%s">'
            '</span></span> %s' % (width, colour, html.escape(label)))


def memory_bar(g: Any) -> tuple:
    """(fraction used or None, label) of a GPU's memory."""
    if g.memory_used_mib is None or not g.memory_total_mib:
        return None, "memory n/a"
    return g.memory_used_mib / g.memory_total_mib, "%.1f / %.1f GiB" % (
        g.memory_used_mib / 1024, g.memory_total_mib / 1024)


def util_bar(g: Any) -> tuple:
    """(fraction busy or None, label) of a GPU."""
    if g.utilization_pct is None:
        return None, "util n/a"
    return g.utilization_pct / 100, "%d%%" % g.utilization_pct


def nic_affinity_rows(gpus: HostGpus) -> list[list[str]]:
    rows = [["GPU", "NUMA", "CPUs", "nearest NIC", "link"]]
    for g in gpus.gpus:
        nic = nearest_nic(gpus, g.device)
        rows.append([g.device, "-" if g.numa_node is None else str(g.numa_node), g.cpu_affinity or "-",
                     nic or "-", gpus.link(g.device, nic) if nic else "-"])
    return rows


def host_html(host: HostView) -> str:
    """One host's section: matrix and legend, bars, NIC affinity, hints."""
    gpus = host.gpus
    if gpus is None:
        return "<p>%s: GPUs not probed</p>" % html.escape(host.name)
    if not gpus.gpus:
        return "<p>%s: no GPU (CPU-only host)%s</p>" % (
            html.escape(host.name), html.escape("; %s" % gpus.error) if gpus.error else "")
    bars = "".join("<div>%s %s %s %s</div>" % (
        html.escape(g.device), bar_html(*memory_bar(g)), bar_html(*util_bar(g), colour="#66bb6a"),
        html.escape(g.name or "")) for g in gpus.gpus)
    hints = "".join("<div class=\"mlp-hint\">&#9888; %s</div>" % html.escape(h) for h in host.hints)
    return "".join([matrix_html(gpus), legend_html(), '<div class="mlp-bars">%s</div>' % bars,
                    table_html(nic_affinity_rows(gpus), "mlp-nics"), hints])


def state_html(state: ClusterState) -> str:
    """Self-contained HTML (inline styles only): what nbconvert keeps of the widget."""
    if state.error:
        return '<div class="mlp-cluster"><b>cluster</b>: %s</div>' % html.escape(state.error)
    sections = "".join("<h4>%s</h4>%s" % (html.escape(h.name), host_html(h)) for h in state.hosts)
    return '<div class="mlp-cluster"><div><b>%s</b></div>%s%s</div>' % (
        html.escape(title(state)), table_html(host_rows(state), "mlp-cluster-hosts"), sections)
