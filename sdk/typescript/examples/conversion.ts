// The example of README.md: an advertiser's server registers an order with the click id its
// landing page received, reads the program's figures and walks its conversions. It is
// compiled with the SDK (hack/sdk.sh build); examples/journey.ts runs against the platform.
import { createClient, data, newIdempotencyKey, all, APIError } from "../src/index.js";

declare const process: { env: Record<string, string | undefined> };

const api = createClient({ baseUrl: "https://partners.example.com", credential: process.env.PARTNERSTREAM_API_KEY });

try {
  // Keep the key with the order: a retry with the same key never makes a second conversion.
  const conversion = data(
    await api.POST("/api/v1/conversions", {
      params: { header: { "Idempotency-Key": newIdempotencyKey() } },
      body: { click_id: "clk_...", external_id: "order-1042", amount: "42.00", type: "sale" },
    }),
  );
  console.log("conversion", conversion.id, "commission", conversion.commission.amount);

  const stats = data(await api.GET("/api/v1/stats", { params: { query: { program_id: conversion.program_id } } }));
  console.log(stats.totals.clicks, "clicks,", stats.totals.conversions.total, "conversions");

  // Every page of a list.
  for await (const c of all(async (cursor) => data(await api.GET("/api/v1/conversions", { params: { query: { cursor } } })))) {
    console.log(c.id, c.commission.status);
  }
} catch (err) {
  if (err instanceof APIError) {
    console.error(err.status, err.problem?.code, err.problem?.errors); // e.g. 400 validation_failed [{ field: "amount", ... }]
  }
  throw err;
}
