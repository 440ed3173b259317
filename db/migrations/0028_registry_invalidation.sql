-- placeholder, filled in by its change
SELECT 1;
