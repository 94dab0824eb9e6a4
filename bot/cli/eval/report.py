"""The eval's report: figures per configuration, paired comparisons against the
first configuration, and every per-case answer; written as ``report.json``
(the fields of docs/configuration.md, "debate-bot eval"), ``report.md`` and
``accuracy-cost.png``.

Accuracy counts the cases a configuration answered: an ``ESCALATED`` answer
(an abstention) and a failure are their own columns, neither right nor wrong.
The paired comparison uses the cases both configurations answered.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bot.cli.eval.cache import Result
from bot.cli.eval.configs import EvalConfig
from bot.cli.eval.stats import ConfigFigures, paired_difference, percentile, wilson

ORACLE = "scripted/oracle:"


def figures(config: EvalConfig, results: Sequence[Result]) -> ConfigFigures:
    mine = [r for r in results if r.config == config.name]
    answered = [r for r in mine if r.status == "answered"]
    correct = sum(1 for r in answered if r.correct)
    low, high = wilson(correct, len(answered))
    n = len(mine)
    total = math.fsum(r.cost_usd for r in mine)
    seconds = [r.seconds for r in mine]
    return ConfigFigures(
        name=config.name,
        spec=config.canonical(),
        n=n,
        answered=len(answered),
        correct=correct,
        accuracy=correct / len(answered) if answered else None,
        ci_low=low,
        ci_high=high,
        escalated=sum(1 for r in mine if r.status == "escalated"),
        failed=sum(1 for r in mine if r.status == "failed"),
        cost_usd=total / n if n else 0.0,
        total_usd=total,
        tokens=sum(r.tokens for r in mine) / n if n else 0.0,
        p50_s=percentile(seconds, 50),
        p95_s=percentile(seconds, 95),
    )


def comparisons(configs: Sequence[EvalConfig], results: Sequence[Result]) -> list[dict[str, Any]]:
    """Every configuration against the first, on the cases both answered."""
    if len(configs) < 2:
        return []
    by = {(r.config, r.case_id): r for r in results}
    first = configs[0].name
    out = []
    for other in configs[1:]:
        pairs = []
        for (name, case_id), a in by.items():
            b = by.get((other.name, case_id))
            if name == first and b is not None and a.status == b.status == "answered":
                pairs.append((bool(a.correct), bool(b.correct)))
        p = paired_difference(pairs)
        out.append(
            {
                "a": first,
                "b": other.name,
                "diff": p.diff,
                "diff_low": p.low,
                "diff_high": p.high,
                "p_value": p.p_value,
                "_n": p.n,
                "_only_a": p.only_a,
                "_only_b": p.only_b,
            }
        )
    return out


def report_json(
    figs: Sequence[ConfigFigures], comps: Sequence[dict[str, Any]], results: Sequence[Result]
) -> dict[str, Any]:
    return {
        "configs": [
            {
                "name": f.name,
                "n": f.n,
                "accuracy": f.accuracy,
                "ci_low": f.ci_low,
                "ci_high": f.ci_high,
                "escalated": f.escalated,
                "failed": f.failed,
                "cost_usd": f.cost_usd,
                "tokens": f.tokens,
                "p50_s": f.p50_s,
                "p95_s": f.p95_s,
            }
            for f in figs
        ],
        "comparisons": [{k: v for k, v in c.items() if not k.startswith("_")} for c in comps],
        "cases": [
            {
                "id": r.case_id,
                "config": r.config,
                "answer": r.answer,
                "correct": r.correct,
                "cost_usd": r.cost_usd,
                "seconds": r.seconds,
            }
            for r in results
        ],
    }


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f} %"


def _usd(x: float) -> str:
    return f"${x:.4f}" if x < 1 else f"${x:.2f}"


_ORACLE_NOTE = (
    "> **Test models.** Configurations using `scripted/oracle:<p>` are oracle test "
    "models that answer right with probability p by construction; their figures "
    "check the eval itself and say nothing about any real model.",
    "",
)

_HOW_TO_READ = (
    "",
    "## How to read this",
    "",
    "- Accuracy is over the cases a configuration answered; escalations (the "
    "configuration declined to decide) and failures are counted apart. A configuration "
    "that escalates its hard cases looks more accurate and answers fewer: read both.",
    "- Two configurations differ credibly when the interval of the difference excludes "
    "0 (and McNemar's p is small); overlapping accuracy intervals alone do not decide it.",
    "- Cost is the providers' list price of the tokens used (`DEBATE_BOT_PRICES_FILE` "
    "overrides); time is wall time per case, with the calls of a case side by side.",
    "",
)

_ODD_SHOWN = 50  # escalated and failed cases listed one by one


def report_markdown(
    figs: Sequence[ConfigFigures],
    comps: Sequence[dict[str, Any]],
    results: Sequence[Result],
    *,
    n_cases: int,
    notes: Sequence[str],
    picture: str | None,
) -> str:
    lines = ["# debate-bot eval report", ""]
    if any(ORACLE in f.spec for f in figs):
        lines += _ORACLE_NOTE
    lines += [f"{n_cases} case(s), {len(figs)} configuration(s).", ""]
    lines += [f"- {n}" for n in notes]
    if notes:
        lines.append("")
    lines += _configurations(figs)
    if comps:
        lines += _comparisons(comps)
    lines += ["", "## Accuracy against cost", ""]
    lines.append(
        f"![accuracy against cost per case]({picture})"
        if picture
        else "(no picture: install the `eval` extra, `pip install 'debate-bot[eval]'`)"
    )
    lines += _escalated_and_failed(results)
    lines += _HOW_TO_READ
    return "\n".join(lines)


def _configurations(figs: Sequence[ConfigFigures]) -> list[str]:
    lines = [
        "## Configurations",
        "",
        "| configuration | spec | cases | accuracy (95 % CI) | escalated | failed "
        "| cost / case | tokens / case | p50 | p95 |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for f in figs:
        acc = (
            f"{_pct(f.accuracy)} ({_pct(f.ci_low)}–{_pct(f.ci_high)}), {f.correct}/{f.answered}"
            if f.accuracy is not None
            else "— (nothing answered)"
        )
        lines.append(
            f"| {f.name} | `{f.spec}` | {f.n} | {acc} | {f.escalated} | {f.failed} "
            f"| {_usd(f.cost_usd)} | {f.tokens:,.0f} | {f.p50_s:.1f} s | {f.p95_s:.1f} s |"
        )
    return lines


def _comparisons(comps: Sequence[dict[str, Any]]) -> list[str]:
    lines = [
        "",
        f"## Against {comps[0]['a']}",
        "",
        "Paired, on the cases both answered: the difference in accuracy (second minus "
        "first) with its 95 % interval (Newcombe), and McNemar's exact test on the "
        "cases only one of the two got right.",
        "",
        "| configuration | cases | right only here / only there | difference (95 % CI) "
        "| McNemar p |",
        "| --- | ---: | ---: | --- | ---: |",
    ]
    for c in comps:
        lines.append(
            f"| {c['b']} | {c['_n']} | {c['_only_b']} / {c['_only_a']} "
            f"| {100 * c['diff']:+.1f} pts ({100 * c['diff_low']:+.1f} to "
            f"{100 * c['diff_high']:+.1f}) | {c['p_value']:.3g} |"
        )
    return lines


def _escalated_and_failed(results: Sequence[Result]) -> list[str]:
    odd = [r for r in results if r.status != "answered"]
    if not odd:
        return []
    lines = ["", "## Escalated and failed", "", "| case | configuration | status | why |"]
    lines.append("| --- | --- | --- | --- |")
    for r in odd[:_ODD_SHOWN]:
        lines.append(f"| {r.case_id} | {r.config} | {r.status} | {r.detail} |")
    if len(odd) > _ODD_SHOWN:
        lines.append(f"| … {len(odd) - _ODD_SHOWN} more in report.json | | | |")
    return lines


def write_report(
    out_dir: Path,
    configs: Sequence[EvalConfig],
    results: Sequence[Result],
    *,
    n_cases: int,
    notes: Sequence[str],
) -> tuple[Path, Path, Path | None]:
    from bot.cli.eval.plot import accuracy_cost_png

    figs = [figures(c, results) for c in configs]
    comps = comparisons(configs, results)
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / "report.json"
    json_path.write_text(json.dumps(report_json(figs, comps, results), indent=2) + "\n")
    try:
        png = accuracy_cost_png(figs, out_dir / "accuracy-cost.png")
    except (ValueError, OSError, RuntimeError) as exc:  # the figures matter more than the picture
        png = None
        notes = [*notes, f"The picture could not be drawn ({type(exc).__name__}: {exc})."]
    md_path = out_dir / "report.md"
    md_path.write_text(
        report_markdown(
            figs, comps, results, n_cases=n_cases, notes=notes, picture=png.name if png else None
        )
    )
    return md_path, json_path, png
