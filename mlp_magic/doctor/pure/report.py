"""The doctor's findings and its report: what all hosts share once, each odd host with its value,
errors first (pure).

A ``Finding`` has a severity (error, warning, info), the check it comes from, the hosts it
concerns, what was seen (``detail``) and what to do about it (``fix``). ``compare`` turns one
fact of every host ({host: value}) into either a shared line ("numpy 1.26.4") or a finding
naming the odd hosts with their own value, against the value most hosts have. ``Report`` holds
the findings and the shared facts; it renders as text, HTML and JSON, and gives the exit status
(1 when any finding is an error).
"""
from __future__ import annotations

import html

from mlp_magic.output.pure.grouping import fold_hosts_shown
from mlp_magic.core.proc_stat import start_time
from mlp_magic.core.records import Record, fresh

ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITIES = (ERROR, WARNING, INFO)
_RANK = {severity: index for index, severity in enumerate(SEVERITIES)}
MISSING = None   # a value a host does not have (a variable not set, a package not installed)
MAX_VALUE_CHARS = 160


class Finding(Record, frozen=True):
    severity: str
    check: str          # software, environment, gpus, host, reachability, links
    title: str          # what it is about, short: "numpy version", "NCCL_IB_DISABLE"
    hosts: tuple        # the hosts it concerns (the odd ones)
    detail: str         # what was seen, one line
    fix: str = ""       # what to do about it
    values: tuple = ()  # ((value, (hosts...)), ...) when hosts differ: every group, majority first

    def to_json(self) -> dict:
        return {"severity": self.severity, "check": self.check, "title": self.title,
                "hosts": list(self.hosts), "detail": self.detail, "fix": self.fix,
                "values": [{"value": value, "hosts": list(hosts)} for value, hosts in self.values]}


class Shared(Record, frozen=True):
    """A fact every host answered with the same value."""

    check: str
    title: str
    value: str


def shown(value) -> str:
    """A value as the report writes it; a missing one is "not set"."""
    if value is MISSING:
        return "not set"
    text = str(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS - 3] + "..."


def hosts_text(hosts) -> str:
    return fold_hosts_shown(hosts) if hosts else "no host"


def groups_of(values: dict) -> list:
    """[(value, [hosts])] of {host: value}: the largest group first (ties: the first host's order)."""
    groups: dict = {}
    for host, value in values.items():
        groups.setdefault(_key(value), (value, []))[1].append(host)
    order = list(groups.values())
    return sorted(order, key=lambda group: -len(group[1]))   # stable: first seen first among equals


def _key(value):
    """Values compared by what they show (a list from JSON is not hashable)."""
    return shown(value) if isinstance(value, (list, dict)) else value


def difference_text(groups: list, describe=shown) -> str:
    """ "worker2: 1.0.0; worker[0-1,3]: 1.26.4": each odd group first, the majority last."""
    odd = [f"{hosts_text(hosts)}: {describe(value)}" for value, hosts in groups[1:]]
    value, hosts = groups[0]
    return "; ".join(odd + [f"{hosts_text(hosts)}: {describe(value)}"])


def compare(check: str, title: str, values: dict, *, severity: str = ERROR, fix: str = "",
            describe=shown):
    """One fact of every host -> a ``Shared`` (all equal) or a ``Finding`` naming the hosts that
    differ from the most common value (all of them when no value has a majority)."""
    groups = groups_of(values)
    if not groups:
        return None
    if len(groups) == 1:
        return Shared(check, title, describe(groups[0][0]))
    tie = len(groups[0][1]) == len(groups[1][1])
    odd = [host for value, hosts in (groups if tie else groups[1:]) for host in hosts]
    return Finding(severity, check, title, tuple(odd), difference_text(groups, describe), fix,
                   tuple((None if v is MISSING else shown(v), tuple(h)) for v, h in groups))


class Report(Record):
    """Every finding and shared fact of one doctor run over ``hosts``."""

    hosts: tuple
    findings: list = fresh(list)
    shared: list = fresh(list)
    seconds: float | None = None
    links: dict | None = None     # the link test's numbers (doctor/pure/links), when asked
    answered: int | None = None   # how many hosts answered (the shared facts are theirs)

    def add(self, item) -> None:
        """A Finding or a Shared (``compare``'s answer); None is nothing."""
        if isinstance(item, Finding):
            self.findings.append(item)
        elif isinstance(item, Shared):
            self.shared.append(item)

    def ordered(self) -> list:
        """Errors first, then warnings, then notes; within one severity, as found."""
        return sorted(self.findings, key=lambda f: _RANK.get(f.severity, len(SEVERITIES)))

    def counts(self) -> dict:
        return {severity: sum(f.severity == severity for f in self.findings) for severity in SEVERITIES}

    @property
    def exit_status(self) -> int:
        return 1 if self.counts()[ERROR] else 0

    def summary(self) -> str:
        counts = self.counts()
        took = f" in {self.seconds:.1f} s" if self.seconds is not None else ""
        what = ", ".join(f"{n} {s}{'s' if n != 1 else ''}" for s, n in counts.items() if n) or "no findings"
        return f"mlp-magic doctor: {len(self.hosts)} host{'s' if len(self.hosts) != 1 else ''} " \
               f"({hosts_text(self.hosts)}){took}: {what}"

    def to_json(self) -> dict:
        return {"hosts": list(self.hosts), "answered": self.answered, "seconds": self.seconds,
                "counts": self.counts(),
                "exit_status": self.exit_status,
                "findings": [f.to_json() for f in self.ordered()],
                "shared": [{"check": s.check, "title": s.title, "value": s.value} for s in self.shared],
                "links": self.links}

    @property
    def text(self) -> str:
        return render_text(self)

    @property
    def html(self) -> str:
        return render_html(self)


_MARK = {ERROR: "ERROR", WARNING: "WARN ", INFO: "note "}


def render_text(report: Report) -> str:
    lines = [report.summary(), ""]
    for finding in report.ordered():
        lines.append(f"{_MARK.get(finding.severity, finding.severity)} {finding.check}: {finding.title}"
                     f" [{hosts_text(finding.hosts)}]")
        lines.append(f"      {finding.detail}")
        if finding.fix:
            lines.append(f"      fix: {finding.fix}")
    if report.shared:
        if report.findings:
            lines.append("")
        answered = len(report.hosts) if report.answered is None else report.answered
        lines.append(f"All {answered} hosts that answered share:" if answered > 1
                     else "The host that answered:")
        width = max(len(s.title) for s in report.shared)
        for item in report.shared:
            lines.append(f"  {item.title.ljust(width)}  {item.value}")
    return "\n".join(lines).rstrip() + "\n"


_COLOURS = {ERROR: "#c62828", WARNING: "#ef6c00", INFO: "#546e7a"}


def render_html(report: Report) -> str:
    rows = []
    for finding in report.ordered():
        colour = _COLOURS.get(finding.severity, "inherit")
        fix = f"<br><i>fix:</i> {html.escape(finding.fix)}" if finding.fix else ""
        rows.append(
            f"<tr><td style='color:{colour};font-weight:bold'>{html.escape(finding.severity)}</td>"
            f"<td>{html.escape(finding.check)}</td><td>{html.escape(finding.title)}</td>"
            f"<td><code>{html.escape(hosts_text(finding.hosts))}</code></td>"
            f"<td>{html.escape(finding.detail)}{fix}</td></tr>")
    table = ("<table><tr><th>severity</th><th>check</th><th>what</th><th>hosts</th><th>seen</th></tr>"
             + "".join(rows) + "</table>") if rows else ""
    shared = "".join(f"<tr><td>{html.escape(s.title)}</td><td><code>{html.escape(s.value)}</code></td></tr>"
                     for s in report.shared)
    shared_table = (f"<details><summary>shared by every host answering ({len(report.shared)})</summary>"
                    f"<table>{shared}</table></details>") if shared else ""
    return (f"<div class='mlp-doctor'><p><b>{html.escape(report.summary())}</b></p>"
            f"{table}{shared_table}</div>")


REPORT_NAME = "doctor.json"   # the last report, in the state folder: the panel's health column


def health_by_host(document: dict) -> dict:
    """{host: {"state": "error" | "warning" | "ok", "findings": [titles], "checked_at"}} of a
    saved report (``Report.to_json`` with "checked_at"); notes do not count against a host."""
    def listed(key: str) -> list:
        value = document.get(key)
        return value if isinstance(value, list) else []

    checked_at = start_time(document.get("checked_at"))   # NaN or Infinity: no JSON the panel reads
    health = {host: {"state": "ok", "findings": [], "checked_at": checked_at}
              for host in listed("hosts") if isinstance(host, str)}
    for finding in listed("findings"):
        severity = finding.get("severity") if isinstance(finding, dict) else None
        if severity not in (ERROR, WARNING):
            continue
        for host in finding.get("hosts") if isinstance(finding.get("hosts"), list) else []:
            entry = health.get(host) if isinstance(host, str) else None
            if entry is None:
                continue
            entry["findings"].append(str(finding.get("title")))
            if severity == ERROR or entry["state"] == "ok":
                entry["state"] = severity
    return health
