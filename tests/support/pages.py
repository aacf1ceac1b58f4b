"""Page content for :class:`ragsync.testing.DevSite`: plausible text long enough for trafilatura."""

from __future__ import annotations


def page(title: str, sections: dict[str, list[str]], intro: str = "") -> tuple[str, str]:
    """A page as DevSite wants it: ``(title, main_content_html)``."""
    html = [f"<h1>{title}</h1>"]
    if intro:
        html.append(f"<p>{intro}</p>")
    for heading, paragraphs in sections.items():
        html.append(f"<h2>{heading}</h2>")
        html.extend(f"<p>{p}</p>" for p in paragraphs)
    return title, "\n".join(html)


def sentences(topic: str, n: int = 3) -> str:
    """A paragraph of plausible text about ``topic`` (long enough for trafilatura)."""
    parts = [
        f"The {topic} setting controls how the service behaves when traffic grows quickly.",
        f"Operators usually change {topic} during a maintenance window and watch the logs.",
        f"Every change to {topic} is recorded in the audit trail with the operator's name.",
        f"Clients never need a restart after {topic} changes, because the agent reloads it.",
    ]
    return " ".join(parts[:n])


def example_pages(count: int = 4) -> dict[str, tuple[str, str]]:
    """``count`` guide pages under ``/guide/page-N`` plus ``/private/secret``."""
    topics = [
        "retention",
        "replication",
        "throttling",
        "encryption",
        "sharding",
        "caching",
        "backups",
        "quotas",
        "tracing",
        "alerting",
        "failover",
        "compaction",
    ]
    pages = {}
    for i in range(count):
        a, b, c = topics[i % 12], topics[(i + 1) % 12], topics[(i + 2) % 12]
        pages[f"/guide/page-{i}"] = page(
            f"Guide {i}: {a}",
            {
                f"About {a}": [sentences(a)],
                f"Tuning {b}": [sentences(b, 4)],
                f"Limits of {c}": [sentences(c, 2)],
            },
            intro=f"This guide (number {i}) covers {a}, {b} and {c} in depth for operators.",
        )
    pages["/private/secret"] = page("Secret", {"Hidden": [sentences("secret")]})
    return pages
