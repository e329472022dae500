DROP TABLE delivery_endpoints;
