import { ID_PATTERN } from "../protocol/ids.js";
import {
  DOWNSTREAM,
  UPSTREAM,
  backendSubscriptions,
  nodeTopic,
  parseTopic,
  type DownstreamKind,
  type UpstreamKind,
} from "../protocol/topics.js";

/**
 * The one MQTT authorization policy (DESIGN §3 "Authorization policy"): a pure function
 * `(identity, action, topic) -> allow | deny` used by the embedded broker's hooks, the EMQX HTTP
 * authorization endpoint and the Mosquitto role ACLs alike.
 *
 * - spec §5 rule 1: a node subscribes only to its own downstream topics and publishes only to its
 *   own upstream topics (spec §6.1), each named exactly.
 * - spec §5 rule 2: a node never gets a wildcard grant (`svc/#`, `svc/+`, ...).
 * - spec §5 rule 3: the backend subscribes to every upstream topic, through exactly the filters
 *   of {@link backendSubscriptions}; it publishes only to concrete downstream topics.
 * - spec §6.4 rule 5: nothing is retained, so every retained publish is denied.
 * - QoS above 1 is not part of the protocol: denied.
 * - Unknown identity, `$`-topics (`$SYS/...`, `$share/...`), NUL and control characters, empty
 *   levels and topics over {@link MAX_TOPIC_CHARS} characters: denied.
 */

/** Who is connected, as the broker knows it after authentication. */
export type BrokerIdentity =
  | { kind: "node"; configId: string; nodeId: string; clientId: string }
  | { kind: "backend" };

export type BrokerAction = "publish" | "subscribe";

export type AuthzResult = "allow" | "deny";

/** Longest topic or filter the policy accepts (the longest real topic is far shorter). */
export const MAX_TOPIC_CHARS = 256;

/** The username of the backend's high-privilege broker user, unless settings name another. */
export const BACKEND_USERNAME_DEFAULT = "svc-backend";

/** The broker username of a node (DESIGN §3 "Broker identity"): `n:{config_id}:{node_id}`. */
export function nodeUsername(configId: string, nodeId: string): string {
  return `n:${configId}:${nodeId}`;
}

/** The only MQTT client id a node may connect with (DESIGN §3): `svc-{config_id}-{node_id}`. */
export function nodeClientId(configId: string, nodeId: string): string {
  return `svc-${configId}-${nodeId}`;
}

/** The ids of a {@link nodeUsername}; null unless it is exactly `n:{id}:{id}` with valid ids. */
export function parseNodeUsername(username: string): { configId: string; nodeId: string } | null {
  const parts = username.split(":");
  if (parts.length !== 3 || parts[0] !== "n") return null;
  const [, configId, nodeId] = parts as [string, string, string];
  if (!ID_PATTERN.test(configId) || !ID_PATTERN.test(nodeId)) return null;
  return { configId, nodeId };
}

/** The broker identity of a node, with its client id. */
export function nodeIdentity(configId: string, nodeId: string): BrokerIdentity {
  return { kind: "node", configId, nodeId, clientId: nodeClientId(configId, nodeId) };
}

/**
 * Every topic a node may use, for ACL-based brokers (Mosquitto roles): publish = its 6 upstream
 * topics, subscribe = its 4 downstream topics. Literal topics, never patterns.
 */
export function nodeGrants(configId: string, nodeId: string): { publish: string[]; subscribe: string[] } {
  return {
    publish: (Object.keys(UPSTREAM) as UpstreamKind[]).map((k) => nodeTopic(configId, nodeId, k)),
    subscribe: (Object.keys(DOWNSTREAM) as DownstreamKind[]).map((k) => nodeTopic(configId, nodeId, k)),
  };
}

const BACKEND_FILTERS: ReadonlySet<string> = new Set(backendSubscriptions());

// eslint-disable-next-line no-control-regex
const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;

/** Shape checks every topic and filter must pass before any grant is looked at. */
function wellFormed(topic: string): boolean {
  if (typeof topic !== "string" || topic.length === 0 || topic.length > MAX_TOPIC_CHARS) return false;
  if (CONTROL_CHARS.test(topic)) return false;
  // `$SYS/...`, `$share/...`, `$CONTROL/...`: broker-internal, never granted.
  if (topic.startsWith("$")) return false;
  // Empty levels: leading, trailing or doubled `/`.
  if (topic.split("/").includes("")) return false;
  return true;
}

function hasWildcard(topic: string): boolean {
  return topic.includes("+") || topic.includes("#");
}

function validNodeIdentity(identity: { configId: string; nodeId: string; clientId: string }): boolean {
  return (
    ID_PATTERN.test(identity.configId) &&
    ID_PATTERN.test(identity.nodeId) &&
    identity.clientId === nodeClientId(identity.configId, identity.nodeId)
  );
}

/**
 * Decides one publish or subscribe.
 * @param identity who asks; null (unknown) is always denied
 * @param topic the concrete topic of a publish, or the filter of a subscribe
 * @param opts.retain the publish's retain flag (a retained publish is denied)
 * @param opts.qos the publish's QoS or the subscription's requested QoS (above 1 is denied)
 */
export function authorize(
  identity: BrokerIdentity | null,
  action: BrokerAction,
  topic: string,
  opts: { retain?: boolean; qos?: number } = {},
): AuthzResult {
  if (identity === null || identity === undefined) return "deny";
  if (action !== "publish" && action !== "subscribe") return "deny";
  if (!wellFormed(topic)) return "deny";
  if (opts.qos !== undefined && !(opts.qos === 0 || opts.qos === 1)) return "deny";
  if (action === "publish" && opts.retain === true) return "deny";

  if (identity.kind === "backend") {
    if (action === "subscribe") return BACKEND_FILTERS.has(topic) ? "allow" : "deny";
    if (hasWildcard(topic)) return "deny";
    const parsed = parseTopic(topic);
    return parsed !== null && parsed.direction === "downstream" ? "allow" : "deny";
  }

  if (identity.kind !== "node" || !validNodeIdentity(identity)) return "deny";
  // spec §5 rule 2: no wildcard, for publish and subscribe alike.
  if (hasWildcard(topic)) return "deny";
  const parsed = parseTopic(topic);
  if (parsed === null) return "deny";
  if (parsed.configId !== identity.configId || parsed.nodeId !== identity.nodeId) return "deny";
  const wanted = action === "publish" ? "upstream" : "downstream";
  if (parsed.direction !== wanted) return "deny";
  // parseTopic accepted it; insist on the canonical spelling as well.
  return nodeTopic(identity.configId, identity.nodeId, parsed.kind) === topic ? "allow" : "deny";
}
