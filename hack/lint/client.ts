// Compiled by `make lint` (hack/lint.sh) beside openapi.d.ts, the types openapi-typescript
// generates from the document the api serves: a client generated from it must compile and
// read what the API answers. Nothing runs; `tsc --noEmit` is the check.
import type { components, operations, paths } from "./openapi";

type JSONBody<R> = R extends { content: { "application/json": infer T } } ? T : never;

// Operations are named by their operationId.
type ProgramPage = JSONBody<operations["v1ListPrograms"]["responses"][200]>;
export const firstProgramID = (page: ProgramPage): string | undefined => page.data[0]?.id;

// A partnership's commission override is a rule or null (the program's rule).
export const commissionKind = (p: components["schemas"]["Partnership"]): string =>
  p.commission === null ? "program" : p.commission.type;

// The declared headers reach the generated types.
export const rateLimit = (h: operations["v1ListPrograms"]["responses"][200]["headers"]): number =>
  h["RateLimit-Remaining"];
export const retryAfter = (h: components["responses"]["TooManyRequests"]["headers"]): number => h["Retry-After"];

// A receiver narrows a delivery body by its event.
export function describe(e: components["schemas"]["WebhookPayload"]): string {
  switch (e.event) {
    case "partnership.created":
      return `${e.data.program_id} ${e.data.status}`;
    default:
      return `${e.data.id} ${e.data.status} ${e.data.commission_amount}`;
  }
}

// Paths and their request bodies.
type NewLink = NonNullable<paths["/api/v1/tracking-links"]["post"]["requestBody"]>["content"]["application/json"];
export const newLink: NewLink = { program_id: "prg_1", sub1: "spring" };
