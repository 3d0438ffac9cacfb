"""The proxy's stdout lines that are data (``proxy_events``), as the ingest stores them.

Besides records, a replica's stdout says things about itself: a completion slower
than the callers wait, tool-call arguments it repaired, records it lost (a full
log buffer, a failed S3 flush). The ingest keeps those free-text lines that hold
one of the proxy's words (:data:`analyzer.store.record_sql.EVENT_WORDS`) and
parses them with :data:`~analyzer.store.record_sql.INSERT_EVENTS`. Such lines are
few (a handful a day, against thousands of records): Spark finds them among the
judged lines, and the driver puts them through that very SQL on a scratch
in-memory DuckDB, so their times, replicas and counts are parsed as ``analyze``
parses them. Nothing of the parsing is written again for Spark.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analyzer.questions.spark.raw_records import FREE_TEXT, pod_of_prefix
from analyzer.store.db import connect, insert_rows
from analyzer.store.record_sql import EVENT_WORDS, INSERT_EVENTS, NO_REST

#: The longest event line kept, as the ingest cuts it.
EVENT_LINE_CHARS = 2000


def proxy_events(judged: DataFrame) -> pa.Table:
    """``proxy_events`` of the lines ``judged`` (:func:`.raw_records.judge`), ``file_id`` being the file's index.

    An Arrow table in the driver with the relation's columns, in its order.
    """
    text = F.coalesce(F.col("original"), F.col("line"))  # the line as read (not as mended)
    said = F.lit(False)
    for word in EVENT_WORDS:
        said = said | text.contains(word)
    rows = (judged.where((F.col("verdict") == FREE_TEXT) & said)
            .select(F.col("file_index").alias("file_id"), "line_no",
                    pod_of_prefix(F.col("line"), F.col("pfx"), F.col("file_pod")).alias("proxy_pod"),
                    F.substring(text, 1, EVENT_LINE_CHARS).alias("event_line"))
            .collect())
    con = connect(":memory:")
    try:
        con.execute(NO_REST)  # the ingest's `rest` of a batch, empty, then these lines in it
        insert_rows(con, "rest", ("file_id", "line_no", "proxy_pod", "event_line", "verdict"),
                    [(*r, FREE_TEXT) for r in rows])
        con.execute(INSERT_EVENTS)
        return con.sql("SELECT * FROM proxy_events").to_arrow_table()
    finally:
        con.close()
