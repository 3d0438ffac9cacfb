"""Numbered lines judged and typed on Spark as the ingest's SQL does on DuckDB.

:mod:`analyzer.store.record_sql` is the reference: which lines are records
(``_judged``'s verdicts, word for word), the typed hot columns (``HOT_COLUMNS``),
the truncated stdout copies, the replica a prefix names; and
:mod:`analyzer.ingestion.logs` collapses copies of one record (``TWINS``: the
first full copy by file and line stays, and keeps a replica some copy named).
The patterns and the record's fields are taken from ``record_sql`` itself (its
prefix expressions, :data:`~analyzer.store.record_sql.RECORD_STRUCT`, the log
times, the blank characters of :mod:`analyzer.online`), not copied; the column
expressions are written again in Spark's functions, since DuckDB's
``json_transform``, ``try`` and list lambdas have no Spark spelling.

DuckDB's JSON reader is lenient where Spark's is strict and the other way round.
Every field is parsed as text and cast the way ``json_transform`` casts (``"5"``
and ``5.7`` into an INTEGER are 5 and 6, a number into a BOOLEAN is ``<> 0``),
so a field of an unexpected type never spoils its record; what still differs is
listed in docs/spark.md (trailing commas, duplicate keys, a few timestamp
spellings). The records the proxy writes are read identically: the test
``tests/e2e/test_spark_raw.py`` compares every column of the sample week.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from analyzer.io.linereader import MALFORMED, SNIPPET_CHARS
from analyzer.online import BLANK_CHARS, THINK_CLOSE, THINK_OPEN
from analyzer.store.record_sql import (
    LOG_TIME_MAX,
    LOG_TIME_MIN,
    RECORD_STRUCT,
    RECORD_TYPES,
    STDOUT_PREFIX_RE,
)
from analyzer.questions.spark.lake import SPARK_TYPES
from analyzer.questions.spark.raw_lines import LINE, LONG_LINE
from analyzer.store.lake import lake_schema

#: The verdicts of a line that is not bad (record_sql's ``judged``).
OK, BLANK, FREE_TEXT = "ok", "blank", "free_text"

#: DuckDB's ``records`` table: its columns in order, with their Spark types (the database's own schema).
RECORDS_COLUMNS: tuple[tuple[str, str], ...] = tuple((c, SPARK_TYPES[t]) for c, t in lake_schema()["records"])


def parse_schema(struct=RECORD_STRUCT) -> T.StructType:
    """The Spark schema ``from_json`` parses a line with: RECORD_STRUCT's shape, every scalar as text.

    Text, not the column's type: Spark's parser gives up on a field of another
    type (``"5"`` for an INTEGER), where ``json_transform`` casts it; the casts
    are done afterwards, DuckDB's way (:func:`_int`, :func:`_bool`).
    """
    def typ(t):
        if isinstance(t, dict):
            return T.StructType([T.StructField(k, typ(v)) for k, v in t.items()])
        if isinstance(t, list):
            return T.ArrayType(typ(t[0]))
        return T.StringType()

    return typ(struct)


def _int(field: str, typ: str = "INT") -> Column:
    """``json_transform``'s INTEGER/BIGINT of a field read as text (``field``: its SQL path).

    Integers exactly; other numbers rounded half to even (DuckDB's cast of a
    JSON number: 2.5 is 2); ``true``/``false`` as 1/0; anything else NULL.
    """
    return F.expr(f"""try_cast(coalesce(try_cast({field} AS BIGINT),
                                        try_cast(bround(try_cast({field} AS DOUBLE), 0) AS BIGINT),
                                        CASE {field} WHEN 'true' THEN 1 WHEN 'false' THEN 0 END) AS {typ})""")


def _bool(field: str) -> Column:
    """``json_transform``'s BOOLEAN of a field read as text: true/false words, a number ``<> 0``."""
    return F.expr(f"coalesce(try_cast({field} AS BOOLEAN), try_cast({field} AS DOUBLE) <> 0)")


def _count(c: Column) -> Column:
    """DuckDB's ``len(list)``: NULL for NULL (Spark's ``size`` says -1 or NULL by setting)."""
    return F.when(c.isNotNull(), F.size(c))


def _blank(c: Column) -> Column:
    """``record_sql.blank_sql``: no character outside :data:`analyzer.online.BLANK_CHARS`."""
    visible = "[^" + "".join(f"\\x{{{ord(ch):x}}}" for ch in BLANK_CHARS) + "]"
    return ~c.rlike(visible)


def _leak(c: Column) -> Column:
    """``record_sql.leak_sql``: :func:`analyzer.online.has_leaked_think_block` on a column."""
    blank = "[" + "".join(f"\\x{{{ord(ch):x}}}" for ch in BLANK_CHARS) + "]"
    close, opened = F.instr(c, THINK_CLOSE), F.instr(c, THINK_OPEN)
    return F.when(~c.contains("think>"), F.lit(False)).otherwise(
        c.rlike(f"^{blank}*{THINK_OPEN}") | ((close > 0) & ((opened == 0) | (close < opened))))


def pod_of_prefix(line: Column, pfx: Column, file_pod: Column) -> Column:
    """record_sql's ``_POD_OF_PREFIX``: the pod a multi-pod prefix names (kubectl's, else stern's),
    else the record's own replica hint (a LiteLLM payload's deployment), else the file's."""
    named = F.coalesce(F.nullif(F.regexp_extract(line, STDOUT_PREFIX_RE, 1), F.lit("")),
                       F.nullif(F.regexp_extract(line, STDOUT_PREFIX_RE, 2), F.lit("")))
    return F.coalesce(F.when(pfx != "", named), F.col("j.proxy_pod"), file_pod)


def judge(lines: DataFrame) -> DataFrame:
    """Each line of ``lines`` (:data:`.raw_lines.LINES_DDL`, kind ``line``) with its verdict and parse.

    Adds ``pfx``, ``candidate``, ``j`` (the parsed record), ``ts`` and
    ``verdict``: record_sql's ``_judged``, branch for branch.
    """
    df = lines.where(F.col("kind") == LINE)
    df = df.withColumn("pfx", F.when(F.col("from_stdout"), F.regexp_extract("line", STDOUT_PREFIX_RE, 0))
                       .otherwise(F.lit("")))
    df = df.withColumn("candidate", F.when(F.col("pfx") != "", F.expr("substr(line, length(pfx) + 1)"))
                       .when(~F.col("from_stdout"), F.col("line")))
    df = df.withColumn("j", F.from_json("candidate", parse_schema()))
    # DuckDB's `j IS NULL`: the text is no JSON document. Spark's parser reads the
    # first value and ignores what follows (`{...}{...}`, `{...} junk`), and takes
    # a field of the wrong shape as a bad record: the line as the one element of
    # an array tells a whole, single document apart.
    df = df.withColumn("valid", F.expr("json_array_length(concat('[', candidate, ']')) = 1"))
    stamp = F.col("j.timestamp")
    # A full date first: Spark reads '2026' and '2026-11' as times, DuckDB does not.
    parsed = F.when(stamp.rlike(r"^\s*-?\d+-\d{1,2}-\d{1,2}"),
                    F.expr("cast(try_cast(j.timestamp AS TIMESTAMP_LTZ) AS TIMESTAMP_NTZ)"))
    df = df.withColumn("ts", parsed)
    # 'infinity' and 'epoch' are times to DuckDB (outside the log times), none to Spark.
    known_time = F.col("ts").isNotNull() | F.lower(F.trim(stamp)).isin("infinity", "-infinity", "epoch")
    in_range = (F.col("ts") >= F.lit(LOG_TIME_MIN).cast("timestamp_ntz")) & \
               (F.col("ts") < F.lit(LOG_TIME_MAX).cast("timestamp_ntz"))
    rtype = F.col("j.type")
    verdict = (
        F.when(F.col("valid") & rtype.isin(*RECORD_TYPES) & in_range, F.lit(OK))
        .when(F.col("candidate").isNull(), F.when(F.trim("line") == "", F.lit(BLANK)).otherwise(F.lit(FREE_TEXT)))
        .when(F.trim("candidate") == "", F.lit(BLANK))
        .when(~F.coalesce(F.col("valid"), F.lit(False)), F.lit(MALFORMED))
        .when(~F.ltrim("candidate").startswith("{"), F.lit("not a JSON object"))
        .when(rtype.isNull() | ~rtype.isin(*RECORD_TYPES),
              F.lit("not a proxy record (no request/response/system_prompt type)"))
        .when(known_time, F.concat(F.lit("timestamp "), F.expr("left(j.timestamp, 40)"),
                                   F.lit(f" is not a log time (outside {LOG_TIME_MIN} .. {LOG_TIME_MAX})")))
        .otherwise(F.lit("no valid timestamp"))
    )
    # A line the ingest mended (a lone surrogate escape) stays malformed unless mended into a record.
    verdict = F.when(F.col("original").isNotNull() & ~verdict.isin(OK, BLANK, FREE_TEXT), F.lit(MALFORMED)) \
        .otherwise(verdict)
    return df.withColumn("verdict", verdict)


def typed(judged: DataFrame) -> DataFrame:
    """The lines judged ``ok`` as rows of ``records`` (record_sql's ``HOT_COLUMNS`` and provenance).

    ``file_id`` is the file's place in the input (:func:`.raw.read_raw` numbers
    them); ``ingest_batch`` is NULL (no batches here).
    """
    j = lambda name: F.col(f"j.{name}")  # noqa: E731 - a field of the parsed record
    m = F.col("j.messages")
    tool_history = F.exists(m, lambda x: x.role.isin("tool", "function") | (
        (x.role == "assistant") & ((F.coalesce(F.size(x.tool_calls), F.lit(0)) > 0) | x.function_call.isNotNull())))
    content, preview = j("content"), j("content_preview")
    cols = {
        "ts": F.col("ts"),
        "type": j("type"), "request_id": j("request_id"), "session_id": j("session_id"), "client": j("client"),
        "provider": j("provider"), "model": j("model"), "origin": j("origin"),
        "message_count": _int("j.message_count"), "tools_count": _int("j.tools_count"),
        "enable_thinking": _bool("j.enable_thinking"),
        "tool_results_count": _count(j("tool_results_this_turn")),
        "prompt_md5": F.md5(j("user_message_this_turn")),
        "has_messages": m.isNotNull(),
        "messages_tool_history": F.when(m.isNotNull(), F.coalesce(tool_history, F.lit(False))),
        "latency_ms": _int("j.latency_ms", "BIGINT"),
        "has_content": _bool("j.has_content"), "has_tool_calls": _bool("j.has_tool_calls"),
        "has_reasoning": _bool("j.has_reasoning_content"),
        "tool_call_count": _count(j("tool_calls")),
        "content_chars": F.length(content), "reasoning_chars": F.length(j("reasoning_content")),
        "prompt_tokens": _int("j.tokens.prompt_tokens", "BIGINT"),
        "completion_tokens": _int("j.tokens.completion_tokens", "BIGINT"),
        "cached_tokens": _int("j.tokens.prompt_tokens_details.cached_tokens", "BIGINT"),
        "error": j("error"), "upstream_headers": j("upstream_headers"),
        "log_fields_version": _int("j.log_fields_version"), "upstream_status": _int("j.upstream_status"),
        "finish_reason": j("finish_reason"), "max_tokens": _int("j.max_tokens"),
        "thinking_token_budget": _int("j.thinking_token_budget"), "tool_history": _bool("j.tool_history"),
        "logged_class": j("incident_class"), "final_class": j("final_class"), "ladder": j("ladder"),
        "system_sha256": j("system_sha256"),
        "truncated": (F.col("pfx") != "") & (F.col("candidate").contains("…(+")
                                             | F.col("candidate").contains("\\u2026(+")),
        "file_id": F.col("file_index"), "line_no": F.col("line_no"), "raw": F.col("candidate"),
        "proxy_pod": pod_of_prefix(F.col("line"), F.col("pfx"), F.col("file_pod")),
        "ingest_batch": F.lit(None),
        "reasoning_tokens": _int("j.tokens.completion_tokens_details.reasoning_tokens", "BIGINT"),
        "content_blank": F.when(content.isNotNull(), _blank(content)).when(preview.isNotNull(), _blank(preview)),
        "ladder_armed": _bool("j.ladder_armed"),
        "content_leak": _leak(F.coalesce(content, preview)),
        "reasoning_blank": _blank(F.coalesce(j("reasoning_content"), j("reasoning_content_preview"))),
        "reasoning_repaired": _bool("j.reasoning_repaired"),
        "gateway": j("gateway"),
    }
    return judged.where(F.col("verdict") == OK).select(
        *[cols[name].cast(typ).alias(name) for name, typ in RECORDS_COLUMNS])


def collapse(records: DataFrame) -> DataFrame:
    """One row per record: copies of one record (same time, type, request id, prompt hash, session) collapse.

    As the ingest de-duplicates (record_sql's ``TWINS``): a full copy before a
    truncated stdout copy, then the first by file and line; the copy kept takes
    a replica some copy named when it names none.
    """
    key = ["ts", "type", "request_id", "system_sha256", "session_id"]
    order = Window.partitionBy(*key).orderBy("truncated", "file_id", "line_no")
    return (records
            .withColumn("_copy", F.row_number().over(order))
            .withColumn("_any_pod", F.max("proxy_pod").over(Window.partitionBy(*key)))
            .where(F.col("_copy") == 1)
            .withColumn("proxy_pod", F.coalesce("proxy_pod", "_any_pod"))
            .drop("_copy", "_any_pod"))


def quarantined(lines: DataFrame, judged: DataFrame) -> DataFrame:
    """The lines set aside, as ``quarantine`` holds them: ``file_id, path, line_no, reason, snippet``."""
    bad = judged.where(~F.col("verdict").isin(OK, BLANK, FREE_TEXT)).select(
        F.col("file_index").alias("file_id"), "path", "line_no", F.col("verdict").alias("reason"),
        F.expr(f"left(coalesce(original, line), {SNIPPET_CHARS})").alias("snippet"))
    long = lines.where(F.col("kind") == LONG_LINE).select(
        F.col("file_index").alias("file_id"), "path", "line_no", F.col("detail").alias("reason"),
        F.col("line").alias("snippet"))
    return bad.unionByName(long)


