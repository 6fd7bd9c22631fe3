"""The plan's money beyond training: an EMR cluster's preprocessing $ and the profile's budget."""

from __future__ import annotations

from dataclasses import replace

from remote.pricing import PriceBook
from remote.profile import Profile
from remote.review.candidates import Candidate
from remote.review.datasize import PrepEstimate
from remote.review.metrics import billed_usd
from remote.review.money_text import money


def price_prep(prep: list[PrepEstimate], profile: Profile, book: PriceBook) -> list[PrepEstimate]:
    """``prep`` with the EMR estimate's $/h and $ (its cluster's EC2 price and EMR surcharge)."""
    rate = sum(
        line.total_usd_per_hour for line in profile.cost_lines(book) if line.stage == "preprocess"
    )
    return [
        replace(p, usd_per_hour=rate, usd=billed_usd(p.seconds, rate))
        if p.runner == "emr" and rate > 0
        else p
        for p in prep
    ]


def own_budget_notes(profile: Profile, target: Candidate, prep_usd: float) -> list[str]:
    """What the profile's own budget would do to the predicted run: a run whose predicted $
    passes budget.max_usd is stopped there; a $/h above max_usd_per_hour never launches."""
    budget, out = profile.budget, []
    if budget.max_usd_per_hour is not None and target.usd_per_hour > budget.max_usd_per_hour:
        out.append(
            f"the profile's budget.max_usd_per_hour ${budget.max_usd_per_hour:g} is below its "
            f"machines' ${target.usd_per_hour:.4g}/h: `sentitop run` refuses to launch it"
        )
    total = target.usd + prep_usd
    if budget.max_usd is not None and total > budget.max_usd:
        share = budget.max_usd / total
        out.append(
            f"the profile's budget.max_usd ${budget.max_usd:g} is below the predicted "
            f"{money(total)}: the run would be stopped (and torn down) about "
            f"{share:.0%} of the way, keeping its last checkpoint; raise budget.max_usd or "
            "plan fewer epochs"
            if share >= 0.01
            else f"the profile's budget.max_usd ${budget.max_usd:g} is below the predicted "
            f"{money(total)}: the run would be stopped at its start; raise budget.max_usd"
        )
    return out
