"""Regenerate everything in sample_logs/ from a fixed seed.

    python sample_logs/generate.py            # rewrite sample_logs/ in place
    python sample_logs/generate.py --out DIR  # write the same files elsewhere

The files are a pure function of the constants below and of tools.simulator (and,
for the ladder days, analyzer.online), so running this twice gives byte-identical
output. The class counts in README.md (between the ``generated`` markers) are
rewritten from the ground truth on every run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from a checkout without installing

import tools.simulator as sim  # noqa: E402
from tools.simulator.clock import iso_seconds  # noqa: E402

SEED = sim.DEFAULT_SEED
SESSIONS = 400
START = sim.DEFAULT_START  # Monday 2026-11-16 00:00 UTC (ISO week 2026-W47)
DAYS = 7
# The proxy's FLUSH_INTERVAL for the sample. The proxy default is 60 s, which for
# this traffic gives ~1,000 tiny chunks; 300 s keeps the folder to a few hundred
# files without changing anything else about the chunks.
FLUSH_INTERVAL_S = 300
CONSOLIDATED_DAY = "2026-11-16"

GENERATED_PARTS = ("s3", "kubectl", "consolidated", "metrics", "ground_truth.json")
MARK_START = "<!-- generated: counts -->"
MARK_END = "<!-- /generated -->"


def generate(out: Path) -> dict:
    """Write every form of the sample week under ``out``; return the ground-truth summary."""
    out.mkdir(parents=True, exist_ok=True)
    for part in GENERATED_PARTS:
        target = out / part
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    week = sim.simulate_week(seed=SEED, sessions=SESSIONS, start=START, days=DAYS)
    s3 = sim.write_s3_chunks(week, out / "s3", flush_interval_s=FLUSH_INTERVAL_S, malformed=True)
    pods = sim.write_kubectl_stdout(week, out / "kubectl", s3_enabled=True, flush_interval_s=FLUSH_INTERVAL_S)
    rows = sim.write_consolidated_parquet(
        sim.records_on(week, CONSOLIDATED_DAY), out / "consolidated" / "daily" / f"{CONSOLIDATED_DAY}.parquet"
    )
    sim.write_prometheus_exports(week, out / "metrics")
    summary = sim.write_ground_truth(week, out / "ground_truth.json", malformed=s3.malformed)
    summary["files"] = {"s3_chunks": len(s3.files), "kubectl_pods": len(pods), "parquet_rows": rows}
    summary["malformed"] = s3.malformed
    summary["week"] = week
    return summary


def counts_markdown(summary: dict) -> str:
    """The README section with the counts of this run."""
    counts = summary["class_counts"]
    totals = summary["totals"]
    classes = sorted({c for per in counts.values() for c in per}, key=_class_order)
    lines = [
        f"Records: {totals['records']:,} ({totals['request']:,} requests, {totals['response']:,} responses, "
        f"{totals['system_prompt']} system prompts); request ids in the ground truth: {totals['truth']:,}; "
        f"sessions with an id: {totals['sessions_with_id']}; S3 chunks: {summary['files']['s3_chunks']}; "
        f"proxy pods: {summary['files']['kubectl_pods']}; Parquet rows ({CONSOLIDATED_DAY}): "
        f"{summary['files']['parquet_rows']:,}.",
        "",
        "| model | " + " | ".join(classes) + " | total |",
        "|---|" + "---:|" * (len(classes) + 1),
    ]
    for model, per in counts.items():
        cells = [str(per.get(c, "")) for c in classes]
        lines.append(f"| {model} | " + " | ".join(cells) + f" | {sum(per.values())} |")
    total = {c: sum(per.get(c, 0) for per in counts.values()) for c in classes}
    lines.append("| **all** | " + " | ".join(str(total[c]) for c in classes) + f" | {sum(total.values())} |")
    lines += ["", "Episodes (what the metrics analysis must find):", ""]
    for e in summary["week"].episodes:
        lines.append(f"- `{e.kind}` {e.model_name} pod `{e.pod}`: {iso_seconds(e.start)} → "
                     f"{iso_seconds(e.end)} ({e.note})")
    lines += ["", "Not episodes (look-alikes the analysis must not flag):", ""]
    for e in summary["week"].non_episodes:
        lines.append(f"- `{e.kind}` {e.model_name} `{e.pod}`: {iso_seconds(e.start)} → "
                     f"{iso_seconds(e.end)} ({e.note})")
    lines += ["", "Malformed lines (for quarantine):", ""]
    for m in summary["malformed"]:
        rid = f", request `{m['request_id']}`" if m.get("request_id") else ""
        lines.append(f"- `s3/{m['file']}` line {m['line']}: {m['kind']} ({m['note']}{rid})")
    return "\n".join(lines)


def _class_order(name: str) -> int:
    order = ("ok", "tool-history-5xx", "empty-200-stop", "length-with-no-content", "wedged-pod", "pod-down",
             "timeout", "connection-error", "other-5xx", "rate-limited", "client-error", "client-cancelled",
             "unanswered", "tool-call-stop-mismatch")
    return order.index(name) if name in order else len(order)


def update_readme(readme: Path, section: str) -> None:
    """Replace the generated section of README.md (kept byte-stable across runs)."""
    if not readme.exists():
        return
    text = readme.read_text(encoding="utf-8")
    if MARK_START not in text or MARK_END not in text:
        return
    head, rest = text.split(MARK_START, 1)
    _, tail = rest.split(MARK_END, 1)
    readme.write_text(f"{head}{MARK_START}\n{section}\n{MARK_END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="output directory (default: sample_logs/)")
    args = parser.parse_args(argv)
    summary = generate(args.out)
    section = counts_markdown(summary)
    update_readme(args.out / "README.md", section)
    print(json.dumps({"totals": summary["totals"], "files": summary["files"]}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
