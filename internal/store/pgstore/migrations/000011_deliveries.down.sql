DROP TABLE delivery_attempts;
DROP TABLE deliveries;
