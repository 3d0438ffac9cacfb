-- macro: wilson_interval
-- title: 95% Wilson score interval for k successes in n trials
-- wilson_low(k, n) and wilson_high(k, n): the bounds of the interval for the rate
-- k / n (NULL when n = 0). Unlike k / n +- 1.96 * se it stays inside [0, 1] and
-- stays wide for small n (clamped against rounding), so 2 of 2 reads as "somewhere between 34% and 100%".
-- All arithmetic is in DOUBLE: k and n may arrive as INTEGER (a Python int, a
-- count cast down), and 4 * n * n overflows INT32 from n = 23,171 turns.
CREATE OR REPLACE MACRO wilson_low(k, n) AS
    CASE WHEN n > 0 THEN greatest(0.0,
        ((k::DOUBLE / n::DOUBLE) + 3.841458820694124 / (2.0 * n::DOUBLE)
         - 1.959963984540054 * sqrt((k::DOUBLE / n::DOUBLE) * (1.0 - k::DOUBLE / n::DOUBLE) / n::DOUBLE
                                    + 3.841458820694124 / (4.0 * n::DOUBLE * n::DOUBLE)))
        / (1.0 + 3.841458820694124 / n::DOUBLE))
    END;
CREATE OR REPLACE MACRO wilson_high(k, n) AS
    CASE WHEN n > 0 THEN least(1.0,
        ((k::DOUBLE / n::DOUBLE) + 3.841458820694124 / (2.0 * n::DOUBLE)
         + 1.959963984540054 * sqrt((k::DOUBLE / n::DOUBLE) * (1.0 - k::DOUBLE / n::DOUBLE) / n::DOUBLE
                                    + 3.841458820694124 / (4.0 * n::DOUBLE * n::DOUBLE)))
        / (1.0 + 3.841458820694124 / n::DOUBLE))
    END;
