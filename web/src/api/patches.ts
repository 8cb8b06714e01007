/**
 * Pure functions that put what the backend sent into a cached answer: used by the SSE cache
 * table (`sse/cache-effects.ts`) and by mutations that already hold the new value. They copy
 * the backend's fields, never compute presence, sync or integrity in the browser (spec §6.5
 * rule 7).
 */
import type { ChannelListAnswer, ChannelView, CommandStatus, ConfigListAnswer, ControlLogView, EndpointStatusView, NodeView } from "./types.js";
import type { AlertRuleListAnswer, AlertRuleView } from "./types.js";

/**
 * A whole config list as `GET /api/v1/configs` answers it (one page, no next): what an SSE
 * `config.list.updated` payload or a local edit puts into the cache.
 */
export function configListOf(configs: ConfigListAnswer["configs"]): ConfigListAnswer {
  return { configs, next_cursor: null, total: configs.length, matching: configs.length };
}

/**
 * A cached node with the fields `endpoint.status.updated` carries for it put in: mode, effective
 * mode, staged config and the client's state (spec §3.1, §3.2, §3.5). Copied from the backend's
 * frame, never computed in the browser (spec §6.5 rule 7).
 */
export function withEndpointStatus(n: NodeView, s: EndpointStatusView): NodeView {
  return {
    ...n,
    mode: s.mode,
    effective_mode: s.effective_mode,
    staged_config: s.staged_config,
    client: {
      client_initialized: s.client_initialized,
      client_presence_state: s.client_presence_state,
      runtime_state: s.runtime_state,
      last_reachable_at: s.last_reachable_at,
      client_version: s.client_version,
      config_version_state: s.config_version_state,
    },
  };
}

/**
 * `nodes` with the node `nodeId` replaced by `patch(node)`, same order; undefined when it holds
 * no such node (the caller then reads the list again).
 */
export function withNode(nodes: readonly NodeView[], nodeId: string, patch: (n: NodeView) => NodeView): NodeView[] | undefined {
  const i = nodes.findIndex((n) => n.node_id === nodeId);
  const old = nodes[i];
  if (old === undefined) return undefined;
  const out = nodes.slice();
  out[i] = patch(old);
  return out;
}

/** A control log row with the statuses the console saw it take (e.g. accepted → applied). */
export interface LogRow extends ControlLogView {
  history: Array<CommandStatus>;
}

/** The rows the stream brought for one node's control log, by `log_id`. */
export type LiveLog = ReadonlyMap<number, LogRow>;

/** pending < accepted < a final status (spec §3.4: only an ACK closes a command). */
export function logRank(status: CommandStatus | null): number {
  if (status === null) return 0;
  if (status === "pending") return 0;
  if (status === "accepted") return 1;
  return 2;
}

/**
 * `live` with one report of a row added: of two reports of a row, the further-advanced status
 * wins (an event may arrive before or after another that already holds it), and each new status
 * is appended to the row's history.
 */
export function withLogReport(live: LiveLog, log: ControlLogView): LiveLog {
  const prev = live.get(log.log_id);
  if (prev !== undefined && logRank(prev.status) > logRank(log.status)) return live;
  const history = prev?.history ?? [];
  const next = new Map(live);
  next.set(log.log_id, { ...log, history: log.status === null || history[history.length - 1] === log.status ? history : [...history, log.status] });
  return next;
}

/**
 * The alert channel list with one channel put in its place (by name, then id, as
 * `GET /api/v1/alerts/channels` orders them: byte order, like SQLite's), or taken out when
 * `channel` is null (deleted). What `alert.channel.updated` and the channel writes put into the cache.
 */
export function withChannel(list: ChannelListAnswer, channelId: string, channel: ChannelView | null): ChannelListAnswer {
  const rest = list.channels.filter((c) => c.channel_id !== channelId);
  if (channel === null) return { channels: rest };
  const byName = (a: ChannelView, b: ChannelView) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.channel_id < b.channel_id ? -1 : a.channel_id > b.channel_id ? 1 : 0);
  return { channels: [...rest, channel].sort(byName) };
}

/**
 * The alert rule list with one rule put in its place (by name, then id, as
 * `GET /api/v1/alerts/rules` orders them), or taken out when `rule` is null (deleted). What
 * `alert.rule.updated` and the rule writes put into the cache.
 */
export function withRule(list: AlertRuleListAnswer, ruleId: string, rule: AlertRuleView | null): AlertRuleListAnswer {
  const rest = list.rules.filter((r) => r.rule_id !== ruleId);
  if (rule === null) return { rules: rest };
  const byName = (a: AlertRuleView, b: AlertRuleView) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.rule_id < b.rule_id ? -1 : a.rule_id > b.rule_id ? 1 : 0);
  return { rules: [...rest, rule].sort(byName) };
}
