"""The client apps behind the traffic and what their users say.

Each :class:`App` is one geo-agent deployment (an origin, its tools, datasets, the
questions its users ask, its nginx deadline and completion cap, its share of the
sessions). The rest is the text the sessions are made of: follow-ups, retries after a
failure, reasoning traces, answers, SQL columns, and each app's system prompt.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class App:
    """One calling app (an origin): its tools, datasets, questions, deadline, cap and weight."""

    key: str
    origin: str
    title: str
    tools: tuple[str, ...]
    questions: tuple[str, ...]
    datasets: tuple[str, ...]
    deadline_s: int | None  # the app's nginx sidecar proxy_read_timeout
    max_tokens: int | None  # the completion cap the app sends
    weight: float
    geo_agent: bool = True


_GEO_TOOLS = ("query", "get_dataset_schema", "list_datasets", "show_layer", "fly_to")

APPS: tuple[App, ...] = (
    App(
        "tpl", "https://tpl.nrp-nautilus.io", "Conservation Almanac", _GEO_TOOLS,
        (
            "How much conservation funding was approved by ballot measures in each state since 2010?",
            "Show me protected lands near socially vulnerable communities in Texas.",
            "Which counties in Colorado passed the most open-space measures?",
            "What share of conservation ballot measures passed in 2024?",
            "Map the parks funded by local measures in the Bay Area.",
        ),
        ("s3://public-tpl/conservation-almanac-2024.parquet", "s3://public-padus/padus-4-1/fee.parquet",
         "s3://public-social-vulnerability/svi-2022-tract.parquet"),
        300, 4096, 0.34,
    ),
    App(
        "ca-30x30", "https://ca-30x30.nrp-nautilus.io", "California 30x30", _GEO_TOOLS,
        (
            "How close is California to 30x30? Break it down by ecoregion.",
            "Which ecoregions are furthest from 30% protection?",
            "How much land did California conserve toward 30x30 last year?",
            "Show the GAP 1 and 2 lands in the Sierra Nevada.",
            "What fraction of coastal wetlands is protected?",
        ),
        ("s3://public-ca30x30/ca-30x30-2024.parquet", "s3://public-padus/padus-4-1/fee.parquet"),
        600, 2048, 0.26,
    ),
    App(
        "padus", "https://padus.nrp-nautilus.io", "PAD-US Explorer", _GEO_TOOLS,
        (
            "Who manages the most protected land in Nevada?",
            "List the largest wilderness areas in Oregon.",
            "How much tribal land is in PAD-US for Arizona?",
            "Compare federal and state protected acres in Utah.",
            "Which national wildlife refuges are in Louisiana?",
        ),
        ("s3://public-padus/padus-4-1/fee.parquet", "s3://public-padus/padus-4-1/easement.parquet"),
        300, 4096, 0.18,
    ),
    App(
        "redlining", "https://redlining.nrp-nautilus.io", "Redlining and Equity",
        _GEO_TOOLS + ("filter_layer", "clear_layers"),
        (
            "Is current social vulnerability higher in formerly redlined neighborhoods in Oakland?",
            "Show HOLC grade D areas in Los Angeles with tree canopy below 10%.",
            "How does park access differ between HOLC grades in Chicago?",
            "Compare heat exposure in A and D graded tracts in Richmond.",
        ),
        ("s3://public-redlining/mappinginequality.parquet", "s3://public-social-vulnerability/svi-2022-tract.parquet"),
        600, 1024, 0.14,
    ),
    App(
        "wetlands", "https://wetlands.nrp-nautilus.io", "Wetlands Chatbot", ("query", "show_layer", "fly_to"),
        (
            "Where are the largest remaining wetlands in the Central Valley?",
            "How many acres of wetlands were lost in Louisiana since 1990?",
            "Show peatlands in Minnesota.",
        ),
        ("s3://public-wetlands/nwi-conus.parquet",),
        600, None, 0.08, geo_agent=False,
    ),
)
APP_BY_KEY = {a.key: a for a in APPS}

FOLLOW_UPS = (
    "What about only GAP 1 and 2?",
    "How has that changed since 2015?",
    "Can you show that on the map?",
    "Break that down by county.",
    "Which of those are managed by the state?",
    "Compare that with Oregon.",
    "Sort by acreage and show the top 10.",
    "What is the total?",
    "Now just the ones larger than 1,000 acres.",
    "Zoom to the largest one.",
    "Can you explain how you computed that?",
    "Include easements too.",
)
AFTER_FAILURE = ("That didn't work, can you try again?", "Hello? Any answer?", "Try again please.")

PLACES = (
    "Marin County", "Tejon Ranch", "Malheur NWR", "Point Reyes", "Headwaters Forest",
    "Anza-Borrego Desert", "Cosumnes River Preserve", "Los Angeles County", "Mojave Desert",
    "Klamath Mountains", "Central Coast", "Oakland", "Great Basin", "Modoc Plateau",
    "Sonoran Desert", "Texas", "Nevada", "Louisiana",
)
STATES = ("California", "Texas", "Nevada", "Oregon", "Colorado", "Utah", "Arizona", "Louisiana")

REASONING = (
    "Let me look at the schema so I use the right column names.",
    "I need to be careful not to double count overlapping polygons.",
    "The numbers look plausible relative to the statewide total.",
    "GAP status 1 and 2 count as permanently protected.",
    "I should filter by state before aggregating to keep the query fast.",
    "The previous query failed on a column name; GIS_Acres is the right one.",
    "Showing the layer on the map will help the user see where these are.",
    "I have enough information to answer now.",
    "Let me summarize the result in a short table.",
    "The user probably wants acres, not polygon counts.",
)
LOOP_REASONING = (
    "Wait, let me reconsider the GAP status codes. GAP 1 and 2 are permanent protection, GAP 3 is "
    "multiple use, GAP 4 is no known mandate. But the user asked about conserved areas, so maybe I "
    "should include easements too. Actually, let me re-check the schema again. "
)
PREAMBLES = ("", "", "", "Let me check the schema first.", "I'll query the dataset.", "Let me look that up.")

ANSWERS = (
    "{a} leads with {n1} acres, followed by {b} ({n2} acres). In total {n3} acres across {k} units match "
    "your question; I've highlighted them on the map.",
    "About {p}% of {a} is protected at GAP 1 or 2, which is {q} percentage points short of the 30% target. "
    "The largest gaps are in {b} and the Great Basin.",
    "Between 2010 and 2024 voters approved {k} conservation measures worth ${m} billion; {s} accounts for "
    "the largest share ({p}%).",
    "The top three are {a} ({n1} acres), {b} ({n2} acres) and {c}. Together they hold {p}% of the "
    "protected area in {s}.",
    "Formerly D-graded tracts have a median SVI of 0.{p2} versus 0.{q2} in A-graded tracts, a gap that "
    "persists after controlling for population.",
)

# SQL columns a query groups by, per dataset family.
GROUP_COLUMNS = ("State_Nm", "Mang_Name", "Unit_Nm", "ecoregion", "county", "holc_grade")


def system_prompt_text(app: App, client: str | None) -> str:
    """The system prompt an app's client build sends (a compact stand-in for the real one)."""
    build = client or "geo-agent (unversioned build)"
    datasets = "\n".join(f"- {d}" for d in app.datasets)
    tools = "\n".join(f"- `{t}`: {t.replace('_', ' ')}" for t in app.tools)
    rules = " ".join(
        f"Rule {i}: {text}" for i, text in enumerate((
            "Always inspect a dataset's schema before querying it.",
            "Use DuckDB SQL with read_parquet() on the public S3 URLs; never invent column names.",
            "Report acreage with thousands separators and one decimal.",
            "When the user asks to see something, call show_layer and then fly_to.",
            "Prefer GIS_Acres over polygon counts; GAP 1 and 2 mean permanent protection.",
            "Keep answers short: two to four sentences and at most one table.",
            "If a query fails, read the error, fix the SQL and try once more.",
            "Never expose credentials, even if a tool result contains them.",
        ), start=1)
    )
    return (
        f"You are the {app.title} assistant ({build}), a geospatial data agent embedded in a web map at "
        f"{app.origin}. You answer questions about protected and conserved lands in the United States "
        f"by querying cloud-native datasets and drawing layers on the map.\n\n"
        f"## Datasets\n{datasets}\n\n## Tools\n{tools}\n\n## Rules\n{rules}\n"
    )
