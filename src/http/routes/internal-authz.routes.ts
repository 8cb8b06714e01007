import { createHash, timingSafeEqual } from "node:crypto";
import { z } from "zod";
import { AppError } from "../../errors.js";
import { authorize, type BrokerIdentity } from "../../mqtt/authz.policy.js";
import type { App } from "../route-kit.js";
import { errorResponses } from "../schemas.js";

/** The header EMQX sends the shared key in (spec §5 "Broker to backend authorization"). */
export const INTERNAL_KEY_HEADER = "x-svc-internal-key";

/**
 * `"1"` (or `1`) → 1. EMQX sends every placeholder as a string; an empty string (a placeholder
 * with no value) → undefined.
 */
const qosField = z
  .union([z.enum(["0", "1", "2", ""]), z.union([z.literal(0), z.literal(1), z.literal(2)])])
  .optional()
  .transform((v) => (v === undefined || v === "" ? undefined : Number(v)));

/** `"true"`/`"false"` (also `true`/`false`, `"1"`/`"0"`) → boolean; empty → undefined. */
const retainField = z
  .union([z.enum(["true", "false", "1", "0", ""]), z.boolean()])
  .optional()
  .transform((v) => (v === undefined || v === "" ? undefined : v === true || v === "true" || v === "1"));

/**
 * EMQX's HTTP authorization request (brokers.md: `clientid`, `username`, `action`, `topic`,
 * `qos`, `retain` placeholders, every value a string). Unknown extra fields (peerhost, ...) are
 * allowed and ignored. `qos` and `retain` may be absent or empty (EMQX before 5.1.1, or
 * `retain` of a subscribe); a publish without them is denied.
 */
export const emqxAuthzBody = z.looseObject({
  clientid: z.string().max(1024),
  username: z.string().max(1024),
  action: z.enum(["publish", "subscribe"]),
  topic: z.string().max(65535),
  qos: qosField,
  retain: retainField,
});

export const emqxAuthzResponse = z.object({ result: z.enum(["allow", "deny"]) });

const sha256 = (s: string): Buffer => createHash("sha256").update(s, "utf8").digest();

/** Constant-time comparison of a presented key with the configured one; false when none is configured. */
export function internalKeyMatches(presented: unknown, expected: string): boolean {
  if (typeof presented !== "string" || presented.length === 0 || expected.length === 0) return false;
  return timingSafeEqual(sha256(presented), sha256(expected));
}

/**
 * `POST /api/internal/emqx/authz` (spec §4 rule 13): EMQX asks whether one client may publish or
 * subscribe to one topic; the answer comes from the shared {@link authorize} policy, always as
 * 200 `{"result":"allow"|"deny"}`. The route has its own auth (the `x-svc-internal-key` header):
 * a missing or wrong key answers 401, a malformed body 400. EMQX 5.8.6 (`emqx_authz_http`) reads
 * 200 with a `result` and 204 (= allow, so this route never answers 204); any other status, a
 * timeout or a refused connection is `nomatch`, and with this source alone `no_match = deny`
 * (docker-compose.yml) denies.
 * @param opts.sharedKey the current `SVC_BROKER_AUTHZ_SHARED_KEY` (read per request)
 * @param opts.resolve the broker identity of a username, undefined when unknown
 */
export async function internalAuthzRoutes(
  app: App,
  opts: { sharedKey: () => string; resolve: (username: string) => BrokerIdentity | undefined },
): Promise<void> {
  app.post(
    "/api/internal/emqx/authz",
    {
      config: { auth: "public" },
      onRequest: async (req) => {
        if (!internalKeyMatches(req.headers[INTERNAL_KEY_HEADER], opts.sharedKey())) {
          throw new AppError("UNAUTHORIZED", `missing or wrong ${INTERNAL_KEY_HEADER}`);
        }
      },
      schema: {
        operationId: "authorizeEmqxClient",
        tags: ["internal"],
        summary: "EMQX HTTP authorization: may this client publish or subscribe to this topic",
        description:
          `Called by the broker with header \`${INTERNAL_KEY_HEADER}\`. Answers 200 \`{"result":"allow"|"deny"}\`; ` +
          "401 for a missing or wrong key, 400 for a malformed request (EMQX then applies no_match = deny).",
        security: [],
        headers: z.object({ [INTERNAL_KEY_HEADER]: z.string().optional() }),
        body: emqxAuthzBody,
        response: { 200: emqxAuthzResponse, ...errorResponses() },
      },
    },
    async (req) => {
      const { clientid, username, action, topic, qos, retain } = req.body;
      const identity = opts.resolve(username) ?? null;
      // The request is judged for the exact node: its client id must be the node's own.
      const sameClient = identity === null || identity.kind !== "node" || identity.clientId === clientid;
      // A publish whose QoS or retain flag is unknown cannot be checked against §6.4 rule 5.
      const flagsKnown = action === "subscribe" || (qos !== undefined && retain !== undefined);
      const result = sameClient && flagsKnown ? authorize(identity, action, topic, { qos, retain }) : "deny";
      if (result === "deny") {
        req.log.info({ clientid, username, action, topic: topic.slice(0, 300), qos, retain }, "emqx authz deny");
      }
      return { result };
    },
  );
}
