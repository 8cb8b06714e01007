import { isoTime } from "../../lib/clock.js";
import type { AlertMessage } from "../../protocol/alerts.schema.js";
import type { AlertOpenRow, AlertRuleRow } from "../../store/schema.js";

/**
 * The messages the rule engine sends (docs/alerts.md "Rules", "Storms"): an alert when a rule's
 * condition has held for its `for_s`, the message that resolves it (naming its `alert_id` in
 * `data.resolves`), a failed command's, and a window's grouped message. Built by construction in
 * the shape of `alertMessageSchema` (no parse on the hot path).
 */

/** What an open alert remembers of its cause (`alert_open.detail`). */
export interface AlertDetail {
  node_name?: string;
  reason?: string;
  /** A mesh pair's sides (`mesh.pair_broken`), by name when known. */
  pair?: { node_a: string; node_b: string; label: string };
}

/** The alert types that resolve each rule event. */
export const RESOLVED_TYPE: Record<string, string> = {
  "node.offline": "node.online",
  "node.dropped": "node.online",
  "node.sync_stuck": "node.sync_stuck.resolved",
  "mesh.pair_broken": "mesh.pair_broken.resolved",
  "broker.disconnected": "broker.connected",
};

/** Most nodes a grouped message lists by name. */
export const GROUP_LIST_MAX = 20;

const clip = (text: string, max: number) => (text.length <= max ? text : `${text.slice(0, max - 1)}…`);

function subjectName(row: AlertOpenRow, detail: AlertDetail): string {
  if (detail.pair !== undefined) return `mesh pair ${detail.pair.label}`;
  if (row.node_id === null) return "the broker link";
  return `node ${detail.node_name ?? row.node_id}`;
}

function firedTitle(row: AlertOpenRow, detail: AlertDetail): string {
  const who = subjectName(row, detail);
  switch (row.event) {
    case "node.offline":
      return `${who} is offline`;
    case "node.dropped":
      return `${who} dropped (no signal in time)`;
    case "node.sync_stuck":
      return `${who} has not applied its staged config`;
    case "broker.disconnected":
      return "The backend lost its broker link";
    case "mesh.pair_broken":
      return `${who} is broken`;
    default:
      return `${who}: ${row.event}`;
  }
}

function nodeData(row: AlertOpenRow, detail: AlertDetail): Record<string, unknown> {
  if (detail.pair !== undefined) return { pair_id: row.subject, config_id: row.config_id, node_a: detail.pair.node_a, node_b: detail.pair.node_b };
  return row.node_id === null ? {} : { node_id: row.node_id, node_name: detail.node_name ?? null, config_id: row.config_id };
}

/** The alert of an open row that has held for its rule's `for_s`. */
export function firedMessage(row: AlertOpenRow, rule: Pick<AlertRuleRow, "rule_id" | "name" | "for_s">, now: number): AlertMessage {
  const detail = JSON.parse(row.detail) as AlertDetail;
  const held = rule.for_s > 0 ? ` and still is ${Math.round((now - row.since) / 1000)} s later` : "";
  const reason = detail.reason === undefined ? "" : ` (${detail.reason})`;
  return {
    type: row.event,
    timestamp: isoTime(now),
    title: clip(firedTitle(row, detail), 200),
    text: clip(`${firedTitle(row, detail)} since ${isoTime(row.since)}${held}${reason}. Rule "${rule.name}".`, 4000),
    severity: row.event === "node.sync_stuck" ? "warning" : "critical",
    data: { alert_id: row.alert_id, rule_id: rule.rule_id, rule_name: rule.name, ...nodeData(row, detail), since: isoTime(row.since), ...(detail.reason === undefined ? {} : { reason: detail.reason }) },
  };
}

/** The message that resolves a fired alert: `data.resolves` is its `alert_id`. */
export function resolvedMessage(row: AlertOpenRow, now: number): AlertMessage {
  const detail = JSON.parse(row.detail) as AlertDetail;
  const type = RESOLVED_TYPE[row.event] ?? `${row.event}.resolved`;
  const who = subjectName(row, detail);
  const title = type === "node.online" ? `${who} is back online` : type === "broker.connected" ? "The backend's broker link is back" : `Resolved: ${firedTitle(row, detail)}`;
  const lasted = Math.round((now - row.since) / 1000);
  return {
    type,
    timestamp: isoTime(now),
    title: clip(title, 200),
    text: clip(`${title} after ${lasted} s. It resolves alert ${row.alert_id} (${row.event} since ${isoTime(row.since)}).`, 4000),
    severity: "resolved",
    data: { resolves: row.alert_id, resolves_type: row.event, rule_id: row.rule_id, ...nodeData(row, detail), since: isoTime(row.since), lasted_s: lasted },
  };
}

/**
 * The message that closes a fired alert whose subject is gone (a node or pair deleted, the mesh
 * replaced by a snapshot restore): type `alert.subject_removed`, `data.resolves` its `alert_id`
 * and `data.removed` how it went. Not the event's own resolution: a deleted node did not come back.
 */
export function removedMessage(row: AlertOpenRow, removed: "deleted" | "restored", now: number): AlertMessage {
  const detail = JSON.parse(row.detail) as AlertDetail;
  const how = removed === "deleted" ? "was deleted" : "was replaced by a snapshot restore";
  const title = `Resolved: ${subjectName(row, detail)} ${how}`;
  const lasted = Math.round((now - row.since) / 1000);
  return {
    type: "alert.subject_removed",
    timestamp: isoTime(now),
    title: clip(title, 200),
    text: clip(`${title} after ${lasted} s. It closes alert ${row.alert_id} (${row.event} since ${isoTime(row.since)}); nothing more will be said of it.`, 4000),
    severity: "resolved",
    data: { resolves: row.alert_id, resolves_type: row.event, rule_id: row.rule_id, ...nodeData(row, detail), since: isoTime(row.since), lasted_s: lasted, removed },
  };
}

/** A command that ended failed or timed out, with the agent's message. */
export interface FailedCommand {
  configId: string;
  nodeId: string;
  nodeName: string | undefined;
  action: string;
  requestId: string;
  status: "failed" | "timed_out";
  message: string;
}

export function commandFailedMessage(c: FailedCommand, rule: Pick<AlertRuleRow, "rule_id" | "name">, now: number): AlertMessage {
  const who = `node ${c.nodeName ?? c.nodeId}`;
  const how = c.status === "timed_out" ? "timed out" : "failed";
  const title = `${c.action} ${how} on ${who}`;
  return {
    type: "command.failed",
    timestamp: isoTime(now),
    title: clip(title, 200),
    text: clip(`${title}: ${c.message === "" ? "no message" : c.message}. Rule "${rule.name}".`, 4000),
    severity: "warning",
    data: { rule_id: rule.rule_id, rule_name: rule.name, node_id: c.nodeId, node_name: c.nodeName ?? null, config_id: c.configId, action: c.action, status: c.status, message: c.message, request_id: c.requestId },
  };
}

/**
 * One message for the notices a channel's group window gathered: counts by type and the first
 * {@link GROUP_LIST_MAX} alerts by title; each listed with its data (the node, the alert it
 * resolves). A single notice goes out as it is.
 */
export function groupedMessage(notices: readonly AlertMessage[], windowMs: number, now: number): AlertMessage {
  const [only] = notices;
  if (notices.length === 1 && only !== undefined) return only;
  const counts: Record<string, number> = {};
  for (const n of notices) counts[n.type] = (counts[n.type] ?? 0) + 1;
  const summary = Object.entries(counts).map(([type, n]) => `${n} ${type}`).join(", ");
  const first = notices.slice(0, GROUP_LIST_MAX);
  const more = notices.length - first.length;
  const lines = first.map((n) => `- ${n.title}`).concat(more > 0 ? [`… and ${more} more`] : []);
  const rank = { info: 0, resolved: 1, warning: 2, critical: 3 } as const;
  const severity = notices.reduce<AlertMessage["severity"]>((s, n) => (rank[n.severity] > rank[s] ? n.severity : s), "info");
  return {
    type: "alert.grouped",
    timestamp: isoTime(now),
    title: clip(`${notices.length} alerts: ${summary}`, 200),
    text: clip(`${notices.length} alerts in ${Math.round(windowMs / 1000)} s (${summary}):\n${lines.join("\n")}`, 4000),
    severity,
    data: { count: notices.length, counts, window_s: Math.round(windowMs / 1000), first: first.map((n) => ({ type: n.type, title: n.title, data: n.data })) },
  };
}
