/**
 * The SSE event types of spec §6.5 and their payload schemas. They are part of the wire contract
 * every client reads (the web console included, DESIGN §2: `web/` may import `src/protocol` only),
 * so they live in `src/protocol/sse-events.schema.ts`; this module re-exports them for the hub and
 * the services that import them from here.
 */
export * from "../protocol/sse-events.schema.js";
