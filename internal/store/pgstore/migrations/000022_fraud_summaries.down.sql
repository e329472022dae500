DROP INDEX fraud_verdicts_code;
DROP TABLE fraud_summaries;
