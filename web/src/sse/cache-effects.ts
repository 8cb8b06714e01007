/**
 * What each SSE event type does to the query cache: one entry per type of spec §6.5 (the
 * `satisfies` below fails to compile when a type is added to `src/protocol/sse-events.schema.ts`
 * without one). The provider subscribes this table once per connection (`bindCacheEffects`);
 * pages never subscribe to the stream themselves, they read the cache.
 *
 * The rules (spec §6.5 rule 7): a payload that *is* a cached projection replaces or patches it
 * (`system.status.updated`, `config.overview.updated`, `node.workspace.updated`, the client fields
 * of `endpoint.status.updated`…); anything else invalidates the keys it concerns, coalesced so
 * that a burst is one refetch. Nothing here computes presence, sync or integrity: every value
 * put into the cache is one the backend sent. Queries of configs or nodes nobody has opened are
 * not cached, so their events cost a lookup and change nothing.
 */
import type { InfiniteData } from "@tanstack/react-query";
import { keys } from "../api/keys.js";
import { configListOf, withChannel, withEndpointStatus, withLogReport, withNode, withRule, type LiveLog } from "../api/patches.js";
import type { AlertRuleListAnswer, ChannelListAnswer, ConfigDetailView, ConfigListAnswer, EndpointStatusView, NodeListAnswer, NodeView, SseEventType, SseWirePayloads } from "../api/types.js";
import { COUNTS_COALESCE_MS, type LiveCache } from "./live-cache.js";
import type { SseConnection } from "./connection.js";

/** The cache change one event causes; `null`: the event changes no cached answer (said why where it is). */
export type CacheEffect<T extends SseEventType> = ((payload: SseWirePayloads[T], cache: LiveCache) => void) | null;

export const SSE_CACHE_EFFECTS = {
  /** Home cards, the sidebar and the configs page hold the list; a config dropped from it drops its detail. */
  "config.list.updated": (p, cache) => {
    cache.replace<ConfigListAnswer>(keys.configs, configListOf(p.configs));
    const ids = new Set(p.configs.map((c) => c.config_id));
    for (const q of cache.client.getQueryCache().findAll({ queryKey: keys.configs })) {
      const id = q.queryKey[1];
      if (q.queryKey.length === 2 && typeof id === "string" && !ids.has(id)) cache.invalidateSoon(keys.config(id));
    }
  },
  /** The mesh page's header, node cards and tags; its node table and the node page read again. */
  "config.overview.updated": (p, cache) => {
    cache.set<ConfigDetailView>(keys.config(p.config_id), p.overview);
    cache.invalidateSoon(keys.nodeLists(p.config_id), false);
    // A node may have been deleted or changed along with its config.
    for (const q of cache.client.getQueryCache().findAll({ queryKey: [...keys.config(p.config_id), "nodes"] })) {
      if (q.queryKey.length === 4) void cache.client.invalidateQueries({ queryKey: q.queryKey, exact: true });
    }
  },
  /** The node view: in the config's node list and table, and the node page. */
  "node.workspace.updated": (p, cache) => {
    patchNodeEverywhere(cache, p.config_id, p.node_id, () => p.workspace);
    cache.set<NodeView>(keys.node(p.config_id, p.node_id), p.workspace);
    // Port forwards have no event of their own; a port-forward write re-stages the node.
    cache.invalidateSoon(keys.portForwards(p.config_id, p.node_id));
  },
  /** A newly staged config: the static node page's config text, its per-app forms and port forwards read again. */
  "node.apply.updated": (p, cache) => {
    cache.invalidateSoon(keys.stagedConfig(p.config_id, p.node_id), false);
    cache.invalidateSoon(keys.portForwards(p.config_id, p.node_id));
  },
  /** Pairs and their integrity changed; the node page takes the node view the payload carries. */
  "mesh.workspace.updated": (p, cache) => {
    cache.invalidateSoon(keys.pairs(p.config_id));
    cache.set<NodeView>(keys.node(p.config_id, p.node_id), p.workspace.node);
  },
  /**
   * The node's client state as the backend computed it: into the node wherever it is cached, the
   * control page's status; its state machine and flight recorder (recorded with every presence,
   * runtime, sync or client-version change) read again.
   */
  "endpoint.status.updated": (p, cache) => {
    const { config_id: c, node_id: n } = p;
    patchNodeEverywhere(cache, c, n, (node) => withEndpointStatus(node, p.status));
    cache.patch<NodeView>(keys.node(c, n), (node) => withEndpointStatus(node, p.status));
    cache.set<EndpointStatusView>(keys.endpointStatus(c, n), p.status);
    cache.invalidate(keys.machine(c, n));
    cache.invalidate(keys.timeline(c, n));
    cache.invalidateSoon(keys.latestTransitions(c));
  },
  /** A new control log row: added to the rows of the open control page. */
  "control.log.created": (p, cache) => addLogReport(cache, p.config_id, p.node_id, p),
  /** A command's status changed (ACK or timeout): the further-advanced report of the row wins. */
  "control.log.updated": (p, cache) => addLogReport(cache, p.config_id, p.node_id, p),
  /** The MQTT settings form (never secrets). */
  "settings.mqtt.updated": (p, cache) => cache.replace(keys.mqttSettings, p.mqtt),
  /**
   * The public URL: the Settings form and the loopback warning of every page that hands out a
   * command; the MQTT settings read again, whose public host follows the URL's unless set.
   */
  "settings.server.updated": (p, cache) => {
    cache.replace(keys.serverSettings, p.server);
    cache.invalidate(keys.mqttSettings);
  },
  /** The backups list. */
  "snapshot.list.updated": (p, cache) => cache.replace(keys.backups, { snapshots: p.snapshots }),
  /** The body of `GET /api/v1/system/status` (home, the system view, every MQTT switch). */
  "system.status.updated": (p, cache) => cache.replace(keys.systemStatus, p),
  /** Server time only: the connection keeps the clock offset (`useServerOffset`); no answer is cached. */
  "system.clock.sync": null,
  /** The Audit page's pages, whatever their filters, read again (coalesced: a burst of writes is one refetch). */
  "audit.appended": (_p, cache) => cache.invalidateSoon(keys.audit, false),
  /** The Alerts page's delivery log, whatever its filters, reads again (coalesced: a storm of deliveries is one refetch). */
  "alert.delivery.updated": (_p, cache) => cache.invalidateSoon(keys.alertDeliveries, false),
  /**
   * The channel (created, changed, disabled by the delivery worker) into the Alerts page's list
   * in its place; a deleted one leaves it, and took its deliveries with it, so the log reads again,
   * and left every rule that named it (no rule event of its own), so the rules read again.
   */
  "alert.channel.updated": (p, cache) => {
    cache.patch<ChannelListAnswer>(keys.alertChannels, (old) => withChannel(old, p.channel_id, p.channel));
    if (p.channel === null) {
      cache.invalidateSoon(keys.alertDeliveries, false);
      cache.invalidateSoon(keys.alertRules, false);
    }
  },
  /** A host's peer report was stored: the config's link matrix and that node's peer table read again (coalesced). */
  "config.links.updated": (p, cache) => {
    cache.invalidateSoon(["links", p.config_id], false);
    cache.invalidateSoon(["peers", p.config_id, p.node_id], false);
  },
  /** The rule (created or changed) into the Alerts page's rule list in its place; a deleted one leaves it. */
  "alert.rule.updated": (p, cache) => cache.patch<AlertRuleListAnswer>(keys.alertRules, (old) => withRule(old, p.rule_id, p.rule)),
} satisfies { [T in SseEventType]: CacheEffect<T> };

/**
 * Subscribes every entry of {@link SSE_CACHE_EFFECTS} on `connection`, once each; returns the
 * function that removes them all. A failing effect is reported by the connection and does not
 * stop the others.
 */
export function bindCacheEffects(connection: SseConnection, cache: LiveCache): () => void {
  const offs: Array<() => void> = [];
  for (const type of Object.keys(SSE_CACHE_EFFECTS) as SseEventType[]) {
    const effect = SSE_CACHE_EFFECTS[type] as CacheEffect<SseEventType>;
    if (effect !== null) offs.push(connection.subscribe(type, (payload) => effect(payload, cache)));
  }
  return () => {
    for (const off of offs) off();
  };
}

/**
 * The node in the config's cached detail (a detail without it reads again) and in every cached page of the
 * nodes table (any filters; a patched row stays where it is until the next refetch decides),
 * whose counts read again within {@link COUNTS_COALESCE_MS}.
 */
function patchNodeEverywhere(cache: LiveCache, configId: string, nodeId: string, patch: (n: NodeView) => NodeView): void {
  const detail = cache.client.getQueryData<ConfigDetailView>(keys.config(configId));
  if (detail !== undefined) {
    const nodes = withNode(detail.nodes, nodeId, patch);
    if (nodes !== undefined) cache.client.setQueryData<ConfigDetailView>(keys.config(configId), { ...detail, nodes });
    else cache.invalidateSoon(keys.config(configId));
  }
  cache.client.setQueriesData<InfiniteData<NodeListAnswer, string | null>>({ queryKey: [...keys.nodeLists(configId), "pages"] }, (old) => {
    if (old === undefined) return old;
    let changed = false;
    const pages = old.pages.map((page) => {
      const patched = withNode(page.nodes, nodeId, patch);
      if (patched === undefined) return page;
      changed = true;
      return { ...page, nodes: patched };
    });
    return changed ? { ...old, pages } : old;
  });
  cache.invalidateSoon([...keys.nodeLists(configId), "counts"], false, COUNTS_COALESCE_MS);
}

/** A control log report into the rows of the node's open control page (none open: nothing kept). */
function addLogReport(cache: LiveCache, configId: string, nodeId: string, p: { log: SseWirePayloads["control.log.created"]["log"] }): void {
  const key = keys.controlLogLive(configId, nodeId);
  if (cache.has(key)) cache.client.setQueryData<LiveLog>(key, (old) => withLogReport(old ?? new Map(), p.log));
}
