-- macro: most_frequent
-- title: The value a histogram counts most often, a tie going to the smallest value
-- most_frequent(histogram(x)) is the value x takes most often (NULL when there is
-- none): what mode(x) answers, except that mode() leaves a tie to chance, so two
-- runs over the same turns could name different classes (and a re-run's replayed
-- output differ from its full path's). Counts are compared as BIGINT.
CREATE OR REPLACE MACRO most_frequent(h) AS
    list_sort(list_transform(map_entries(h), lambda e: {'n': -(e.value::BIGINT), 'v': e.key}))[1].v;
