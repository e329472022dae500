// A whole affiliate journey through the SDK, the one test/journey runs under Node against the
// running platform (TestSDKJourneys): an advertiser's program, an affiliate's partnership
// (approved by the advertiser) and tracking link, a visitor's click, the advertiser's
// conversion with the click id, and the advertiser's statistics until the conversion shows;
// then the helpers of src/index.ts against the real API (a retried order, a bad one, a list
// walked page by page).
//
//   PARTNERSTREAM_BASE_URL=http://127.0.0.1:8080 PARTNERSTREAM_ADVERTISER_SESSION=eyJ... \
//   PARTNERSTREAM_ADVERTISER_KEY=ps_... PARTNERSTREAM_AFFILIATE_KEY=ps_... node dist/examples/journey.js
//
// Creating a program and approving a partnership are dashboard operations (a session);
// everything else takes the companies' API keys. It prints what it created as one JSON line.
import { all, createClient, data, newIdempotencyKey, APIError } from "../src/index.js";

declare const process: { env: Record<string, string | undefined>; exitCode?: number };

function env(name: string): string {
  const v = process.env[name];
  if (!v) {
    throw new Error(`${name} is not set`);
  }
  return v;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function journey(): Promise<void> {
  const baseUrl = env("PARTNERSTREAM_BASE_URL");
  const dashboard = createClient({ baseUrl, credential: env("PARTNERSTREAM_ADVERTISER_SESSION") });
  const advertiser = createClient({ baseUrl, credential: env("PARTNERSTREAM_ADVERTISER_KEY") });
  const affiliate = createClient({ baseUrl, credential: env("PARTNERSTREAM_AFFILIATE_KEY") });

  const program = data(
    await dashboard.POST("/api/programs", {
      params: { header: { "Idempotency-Key": newIdempotencyKey() } },
      body: {
        name: "SDK journey (TypeScript)",
        landing_url: "https://shop.example/landing",
        currency: "EUR",
        commission: { type: "percent", percent: "10" },
        visibility: "approval",
      },
    }),
  );

  let partnership = data(await affiliate.POST("/api/v1/partnerships", { body: { program_id: program.id } }));
  partnership = data(
    await dashboard.POST("/api/partnerships/{id}/approve", { params: { path: { id: partnership.id } } }),
  );
  if (partnership.status !== "approved") {
    throw new Error(`partnership ${partnership.id} is ${partnership.status} after approving it`);
  }

  const link = data(
    await affiliate.POST("/api/v1/tracking-links", { body: { program_id: program.id, sub1: "sdk-typescript" } }),
  );

  // A visitor follows the link: the redirect to the landing page carries the click id. A
  // browser's user agent, since tools' agents are counted as bots. The redirect is not
  // followed: the landing page is the brand's.
  const visitor = createClient({ baseUrl });
  const click = await visitor.GET("/c/{code}", {
    params: { path: { code: link.code } },
    redirect: "manual",
    headers: { "User-Agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36" },
  });
  const location = click.response.headers.get("Location");
  if (click.response.status !== 302 || !location) {
    throw new Error(`following ${link.url} answered ${click.response.status}, want a 302 redirect`);
  }
  const clickId = new URL(location).searchParams.get("ps_click_id");
  if (!clickId) {
    throw new Error(`no ps_click_id in the redirect to ${location}`);
  }

  // The order: retried with the same Idempotency-Key while the platform is busy (503), so
  // that a retry never makes a second conversion.
  const orderKey = newIdempotencyKey();
  let conversion;
  for (let attempt = 1; ; attempt++) {
    const res = await advertiser.POST("/api/v1/conversions", {
      params: { header: { "Idempotency-Key": orderKey } },
      body: { click_id: clickId, external_id: `order-${clickId}`, amount: "42.00", type: "sale" },
    });
    if (res.response.status !== 503 || attempt === 20) {
      conversion = data(res);
      break;
    }
    await sleep(500);
  }

  // Statistics are read from ClickHouse, which the click and the conversion reach a moment
  // after the API answered.
  const deadline = Date.now() + 60_000;
  let totals;
  for (;;) {
    const stats = data(await advertiser.GET("/api/v1/stats", { params: { query: { program_id: program.id } } }));
    totals = stats.totals;
    if (totals.clicks >= 1 && totals.conversions.total >= 1) {
      break;
    }
    if (Date.now() > deadline) {
      throw new Error(`the conversion is not in the statistics after 60 s: ${JSON.stringify(totals)}`);
    }
    await sleep(500);
  }

  // What an integration relies on. The order sent again with its key is the same conversion,
  // answered again rather than made twice.
  const again = await advertiser.POST("/api/v1/conversions", {
    params: { header: { "Idempotency-Key": orderKey } },
    body: { click_id: clickId, external_id: `order-${clickId}`, amount: "42.00", type: "sale" },
  });
  const replayed = data(again).id === conversion.id && again.response.headers.get("Idempotent-Replayed") === "true";
  // A bad request is an APIError that names the field.
  let invalidField = "";
  try {
    data(await advertiser.POST("/api/v1/conversions", { body: { click_id: clickId, external_id: "order-bad", amount: "abc" } }));
  } catch (err) {
    if (!(err instanceof APIError)) {
      throw err;
    }
    invalidField = err.problem?.errors?.map((e) => e.field).join(",") ?? "";
  }
  // A second link, and the affiliate's links walked one per page.
  data(await affiliate.POST("/api/v1/tracking-links", { body: { program_id: program.id, sub1: "sdk-typescript-2" } }));
  let links = 0;
  for await (const l of all(async (cursor) =>
    data(await affiliate.GET("/api/v1/tracking-links", { params: { query: { program_id: program.id, limit: 1, cursor } } })),
  )) {
    links += l.program_id === program.id ? 1 : 0;
  }

  console.log(
    JSON.stringify({
      program_id: program.id,
      partnership_id: partnership.id,
      link_code: link.code,
      click_id: clickId,
      conversion_id: conversion.id,
      clicks: totals.clicks,
      conversions: totals.conversions.total,
      replayed,
      invalid_field: invalidField,
      links,
    }),
  );
}

journey().catch((err: unknown) => {
  console.error(err instanceof APIError ? err.message : err);
  process.exitCode = 1;
});
