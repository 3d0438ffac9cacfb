"""The functions a question may call, on every engine: an allow-list, not a list of what is refused.

A question (``analyze sql``, ``analyzer.query``, ``--engine spark``) computes over
the database's relations: it counts, groups, compares times, reads JSON and
lists. The functions below do that and nothing else; a function that reaches
outside the question (DuckDB's ``read_text``, ``glob``, ``query``, ``getenv``,
``current_setting``; Spark's ``reflect`` and ``java_method``; anything an
extension adds) is not here, so it is refused by :mod:`analyzer.questions.guard`
before any engine runs. A function missing from the list is refused too: add it
here (with its group) once it is known to compute only over its arguments.

sqlglot parses the functions it knows into classes (``count`` is
``exp.Count``, ``string_agg`` and ``listagg`` are ``exp.GroupConcat``, DuckDB's
``->>`` is ``exp.JSONExtractScalar``) and leaves the rest as anonymous calls by
name: :data:`TYPED` lists the first, :data:`NAMED` the second (lower case). The
catalog's own macros (``in_scope``, ``wilson_low`` ...) are allowed as well
(:func:`analyzer.questions.guard.catalog_macro_names`).
"""

from __future__ import annotations

from sqlglot import exp

#: Functions sqlglot parses into a class of its own, by group.
TYPED: frozenset[type[exp.Expression]] = frozenset({
    # aggregates
    exp.Count, exp.CountIf, exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Median, exp.Mode, exp.Quantile,
    exp.PercentileCont, exp.PercentileDisc, exp.ApproxQuantile, exp.ApproxDistinct, exp.GroupConcat,
    exp.ArrayAgg, exp.First, exp.Last, exp.AnyValue, exp.ArgMax, exp.ArgMin, exp.LogicalOr, exp.LogicalAnd,
    exp.Stddev, exp.StddevPop, exp.StddevSamp, exp.Variance, exp.VariancePop, exp.CovarPop, exp.CovarSamp,
    exp.Corr, exp.RegrSlope, exp.RegrIntercept, exp.RegrR2, exp.RegrCount, exp.RegrAvgx, exp.RegrAvgy,
    exp.Kurtosis, exp.Skewness, exp.BitwiseAndAgg, exp.BitwiseOrAgg, exp.BitwiseXorAgg,
    # window functions
    exp.RowNumber, exp.Rank, exp.DenseRank, exp.PercentRank, exp.CumeDist, exp.Ntile, exp.Lag, exp.Lead,
    exp.FirstValue, exp.LastValue, exp.NthValue,
    # text
    exp.Lower, exp.Upper, exp.Length, exp.Substring, exp.Left, exp.Right, exp.Concat, exp.ConcatWs,
    exp.Replace, exp.Trim, exp.Pad, exp.SplitPart, exp.Split, exp.RegexpExtract, exp.RegexpExtractAll,
    exp.RegexpReplace, exp.RegexpLike, exp.RegexpILike, exp.RegexpFullMatch, exp.RegexpSplit, exp.RegexpCount,
    exp.StartsWith, exp.EndsWith, exp.Contains, exp.StrPosition, exp.Reverse, exp.Repeat, exp.MD5, exp.SHA,
    exp.SHA2, exp.Format, exp.Ascii, exp.Chr, exp.Initcap, exp.Translate, exp.Levenshtein,
    exp.JarowinklerSimilarity, exp.ToBase64, exp.FromBase64, exp.ArrayToString, exp.Unicode, exp.BitLength,
    exp.ByteLength, exp.Hex, exp.Unhex,
    # times
    exp.TimestampTrunc, exp.DateTrunc, exp.Extract, exp.TimeToUnix, exp.UnixToTime, exp.TimeToStr,
    exp.StrToTime, exp.StrToDate, exp.DateBin, exp.DateDiff, exp.DateAdd, exp.DateSub, exp.CurrentTimestamp,
    exp.CurrentDate, exp.CurrentTime, exp.DateFromParts, exp.TimestampFromParts, exp.Dayname, exp.Monthname,
    exp.Year, exp.Month, exp.Day, exp.DayOfMonth, exp.Hour, exp.Minute, exp.Second, exp.Week, exp.WeekOfYear,
    exp.DayOfWeek, exp.DayOfWeekIso, exp.DayOfYear, exp.Quarter, exp.LastDay, exp.ToDays, exp.Date,
    exp.Timestamp, exp.UnixMicros, exp.UnixMillis, exp.UnixSeconds, exp.MakeInterval, exp.TimestampAdd,
    exp.TimestampDiff, exp.TimestampSub,
    # numbers
    exp.Abs, exp.Round, exp.Floor, exp.Ceil, exp.Sqrt, exp.Cbrt, exp.Ln, exp.Log, exp.Exp, exp.Pow,
    exp.Greatest, exp.Least, exp.Sign, exp.Trunc, exp.Pi, exp.IsNan, exp.IsInf, exp.Factorial, exp.Degrees,
    exp.Radians, exp.Sin, exp.Cos, exp.Tan, exp.Asin, exp.Acos, exp.Atan, exp.Atan2, exp.Rand,
    # conditions and types
    exp.Case, exp.If, exp.Coalesce, exp.Nullif, exp.Cast, exp.TryCast, exp.Typeof, exp.Exists,
    # JSON
    exp.JSONExtract, exp.JSONExtractScalar, exp.JSONKeys, exp.JSONType, exp.ParseJSON, exp.JSONObject,
    exp.JSONArray, exp.FromJson, exp.JSONFormat,
    # lists, structs and maps
    exp.Array, exp.ArrayContains, exp.ArrayContainsAll, exp.ArrayOverlaps, exp.ArraySort, exp.ArrayDistinct,
    exp.ArrayFilter, exp.Transform, exp.ArrayMin, exp.ArrayMax, exp.ArrayConcat, exp.ArrayAppend,
    exp.ArrayPrepend, exp.ArraySize, exp.ArraySlice, exp.Flatten, exp.Explode, exp.Unnest, exp.Struct,
    exp.StructExtract, exp.Map, exp.MapKeys, exp.VarMap, exp.List, exp.Columns,
    # rows generated from numbers (range(10), generate_series(1, 3)): no data is read
    exp.GenerateSeries, exp.ExplodingGenerateSeries,
})

#: DuckDB functions sqlglot does not know by name (it keeps them as anonymous calls), lower case.
NAMED: frozenset[str] = frozenset({
    # aggregates
    "histogram", "entropy", "product", "fsum", "sumkahan", "favg", "mean", "arbitrary", "mad",
    "reservoir_quantile", "approx_top_k", "sem", "bool_xor",
    # text
    "strlen", "regexp_split_to_array", "regexp_matches", "suffix", "prefix", "hash", "printf", "strip_accents",
    "nfc_normalize", "ord", "jaccard", "hamming", "damerau_levenshtein", "jaro_similarity", "mismatches",
    "format_bytes", "bar",
    # times
    "date_part", "datepart", "epoch", "epoch_ms", "epoch_us", "epoch_ns", "try_strptime", "date_sub", "now",
    "age", "weekday", "yearweek", "isoyear", "century", "decade", "millennium", "era", "millisecond",
    "microsecond", "to_hours", "to_minutes", "to_seconds", "to_milliseconds", "to_microseconds", "to_weeks",
    "to_months", "to_years", "timezone", "make_time", "make_timestamp", "time_bucket",
    # numbers
    "isfinite", "gcd", "lcm", "round_even", "even", "nextafter", "bit_count", "xor",
    # conditions
    "iff",
    # JSON
    "json_value", "json_array_length", "json_valid", "json_transform", "json_transform_strict",
    "json_structure", "to_json", "json_group_array", "json_group_object", "json_contains", "json_exists",
    "json_merge_patch", "json_quote", "json_extract_path", "json_extract_path_text", "json_extract_string",
    "json_keys",
    # lists, structs and maps
    "list_value", "list_pack", "list_unique", "list_apply", "list_reduce", "list_aggregate", "list_sum",
    "list_avg", "list_count", "list_cat", "list_position", "list_indexof", "list_slice", "list_extract",
    "list_element", "list_zip", "list_has_all", "list_has_any", "list_bool_or", "list_bool_and",
    "list_reverse", "list_select", "list_where", "list_grade_up", "list_resize", "list_min", "list_max",
    "array_length", "array_position", "array_value", "row", "map_values", "map_entries", "map_extract",
    "map_from_entries", "element_at", "cardinality", "struct_insert",
    # paths held as text (the input file names of source_files): text functions, no file is opened
    "parse_dirpath", "parse_filename", "parse_path",
})

#: The PRAGMAs a question may run on DuckDB: they describe the database, they change nothing.
PRAGMAS: frozenset[str] = frozenset({
    "table_info", "show", "show_tables", "show_tables_expanded", "database_size", "storage_info", "version",
})
