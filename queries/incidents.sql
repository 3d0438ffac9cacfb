-- view: incidents
-- title: Turns that did not end well
-- Every turn whose incident_class is not `ok`, with the same columns as `turns`.
SELECT * FROM turns WHERE incident_class <> 'ok'
