import { ID_PATTERN } from "./ids.js";

/**
 * MQTT topics of the control channel (spec §6.1). Every topic is
 * `svc/{config_id}/{node_id}/{suffix}`; ids follow DESIGN §3, so a topic level never holds
 * `/`, `+`, `#`, NUL or nothing.
 */

export const TOPIC_ROOT = "svc";

/** Downstream suffixes: backend → agent. */
export const DOWNSTREAM = {
  config_push: "config/push",
  control: "control",
  detect: "detect",
  info: "info",
} as const;

/** Upstream suffixes: agent → backend. */
export const UPSTREAM = {
  config_push_ack: "config/push/ack",
  control_ack: "control/ack",
  detect_ack: "detect/ack",
  info_ack: "info/ack",
  event: "event",
  heartbeat: "heartbeat",
} as const;

export type DownstreamKind = keyof typeof DOWNSTREAM;
export type UpstreamKind = keyof typeof UPSTREAM;

const UPSTREAM_BY_SUFFIX = new Map<string, UpstreamKind>(
  Object.entries(UPSTREAM).map(([k, v]) => [v, k as UpstreamKind]),
);
const DOWNSTREAM_BY_SUFFIX = new Map<string, DownstreamKind>(
  Object.entries(DOWNSTREAM).map(([k, v]) => [v, k as DownstreamKind]),
);

/** The topic of one node's downstream or upstream channel. Ids must already be valid. */
export function nodeTopic(configId: string, nodeId: string, kind: DownstreamKind | UpstreamKind): string {
  const suffix = kind in DOWNSTREAM ? DOWNSTREAM[kind as DownstreamKind] : UPSTREAM[kind as UpstreamKind];
  return `${TOPIC_ROOT}/${configId}/${nodeId}/${suffix}`;
}

/** Every topic of one node, named as the bind profile's `topics` (DESIGN §5). */
export function nodeTopics(configId: string, nodeId: string): Record<DownstreamKind | UpstreamKind, string> {
  const out = {} as Record<DownstreamKind | UpstreamKind, string>;
  for (const k of Object.keys(DOWNSTREAM) as DownstreamKind[]) out[k] = nodeTopic(configId, nodeId, k);
  for (const k of Object.keys(UPSTREAM) as UpstreamKind[]) out[k] = nodeTopic(configId, nodeId, k);
  return out;
}

/** The filters the backend subscribes to: every upstream topic of every node (spec §5 rule 3). */
export function backendSubscriptions(): string[] {
  return Object.values(UPSTREAM).map((suffix) => `${TOPIC_ROOT}/+/+/${suffix}`);
}

export interface ParsedTopic {
  configId: string;
  nodeId: string;
  direction: "upstream" | "downstream";
  kind: UpstreamKind | DownstreamKind;
}

/**
 * Parses a concrete topic (not a filter). Returns null for anything that is not exactly one of
 * spec §6.1's topics with valid ids — including wildcards, empty levels and extra levels.
 */
export function parseTopic(topic: string): ParsedTopic | null {
  if (topic.length > 256) return null;
  const parts = topic.split("/");
  if (parts.length < 4 || parts[0] !== TOPIC_ROOT) return null;
  const [, configId, nodeId] = parts as [string, string, string];
  if (!ID_PATTERN.test(configId) || !ID_PATTERN.test(nodeId)) return null;
  const suffix = parts.slice(3).join("/");
  const up = UPSTREAM_BY_SUFFIX.get(suffix);
  if (up !== undefined) return { configId, nodeId, direction: "upstream", kind: up };
  const down = DOWNSTREAM_BY_SUFFIX.get(suffix);
  if (down !== undefined) return { configId, nodeId, direction: "downstream", kind: down };
  return null;
}
