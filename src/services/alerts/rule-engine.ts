import { Counter, type Registry } from "prom-client";
import type { NodeProjection } from "../../actors/projection.js";
import type { CommittedChange } from "../../actors/registry.js";
import type { Clock } from "../../lib/clock.js";
import type { Logger } from "../../logger.js";
import type { AlertMessage } from "../../protocol/alerts.schema.js";
import { newId } from "../../protocol/ids.js";
import { createAlertEngineStatements, type AlertEngineStatements } from "../../store/alert-rules.repository.js";
import { createAlertOutboxStatements, type AlertOutboxStatements } from "../../store/alerts.repository.js";
import type { Store } from "../../store/db.js";
import type { AlertOpenRow, AlertRuleRow } from "../../store/schema.js";
import type { AppEvents } from "../app-events.js";
import type { MeshChange } from "../mesh/mesh-types.js";
import { pairsOf, pairsToRecheck, type PairIntegrityState } from "./pair-watch.js";
import { commandFailedMessage, firedMessage, groupedMessage, removedMessage, resolvedMessage, type AlertDetail, type FailedCommand } from "./rule-messages.js";

/** A node whose committed projection changes (the group commit's list; `before` undefined for a node's first: never an alert). */
export type NodeChange = CommittedChange;

/** What one transaction of the engine did, applied to memory after its commit. */
interface Batch {
  now: number;
  /** Channels whose group window this transaction opened (their first alert went out). */
  opened: Set<string>;
  /** Deliveries written to the outbox. */
  enqueued: number;
  /** The earliest held alert written, ms. */
  heldDue: number | null;
  /** Events of the alerts fired and resolved (counted after the commit). */
  fired: string[];
  resolved: string[];
}

/** What an alert is about: a node, a mesh pair, the broker link; and which rules cover it. */
interface Subject {
  subject: string;
  configId: string | null;
  nodeId?: string;
  covers(rule: AlertRuleRow): boolean;
}

interface CachedRule {
  row: AlertRuleRow;
  channels: string[];
}

export interface AlertRuleEngineDeps {
  store: Store;
  clock: Clock;
  log: Logger;
  /** Emits `alert.enqueued` after a commit that wrote deliveries (the delivery worker looks then). */
  events: AppEvents;
  /** `SVC_ALERTS_GROUP_WINDOW_S`, ms. */
  groupWindowMs: number;
  /** Whether the backend's broker link is up (read when it changes). */
  brokerConnected: () => boolean;
}

const NODE_DOWN_EVENTS = ["node.offline", "node.dropped"] as const;
const NODE_EVENTS = new Set<string>(["node.offline", "node.dropped", "node.sync_stuck"]);
const BROKER = "broker";

const down = (p: NodeProjection) => p.presence !== "online";
const syncStuck = (p: NodeProjection) => p.presence === "online" && p.sync === "pending";

/**
 * The rule engine (docs/alerts.md "Rules", "Storms"): turns committed state changes into alerts
 * in the transaction of the change (persist before emit). A condition opens an alert row held
 * for the rule's `for_s` (one clock timer for the earliest); cleared before that, it is deleted
 * and nothing is sent; held that long, it fires; cleared after, its resolving message names it.
 * Messages go through each channel's group window: the first of a window goes to the outbox at
 * once, the rest wait as notices and leave together, one grouped delivery, when it ends.
 *
 * The hot path stays cheap: rules are cached in memory (re-read after every rule or channel
 * change) and a commit without a presence or sync transition, or with no rule on nodes, costs
 * no statement. A fault of the engine rolls back its own savepoint and is logged: it never fails
 * the node-state write it rides on.
 */
export class AlertRuleEngine {
  readonly #d: AlertRuleEngineDeps;
  readonly #q: AlertEngineStatements;
  readonly #outbox: AlertOutboxStatements;
  /** Enabled rules with at least one channel, by event. */
  #byEvent = new Map<string, CachedRule[]>();
  /** Every rule by id, disabled ones too (their fired alerts' resolutions still go out). */
  #byId = new Map<string, CachedRule>();
  #nodeRules = false;
  /** The `mesh.pair_broken` rules that count (enabled, with a channel). */
  #pairRules = new Set<string>();
  /** Open group windows by channel: the timer that closes each. */
  readonly #windows = new Map<string, unknown>();
  #heldTimer: unknown;
  #heldDue: number | null = null;
  #broker: boolean | undefined;
  #started = false;
  #stopped = false;
  readonly #fired = new Counter({ name: "svc_alert_fired_total", help: "Alerts the rules fired (held for their for_s, or at once), by rule event", labelNames: ["event"] as const, registers: [] });
  readonly #resolved = new Counter({ name: "svc_alert_resolved_total", help: "Fired alerts resolved (their condition cleared, or their subject removed), by rule event", labelNames: ["event"] as const, registers: [] });

  constructor(deps: AlertRuleEngineDeps) {
    this.#d = deps;
    this.#q = createAlertEngineStatements(deps.store);
    this.#outbox = createAlertOutboxStatements(deps.store);
    this.reload();
    // A window a previous run left open (its notices stored) stays open: what comes before
    // start() waits behind those notices, never ahead of them.
    for (const channelId of this.#q.channelsWithNotices()) this.#windows.set(channelId, undefined);
    deps.events.on("broker.connection_changed", () => this.#brokerChanged());
    deps.events.on("mesh.changed", (change) => this.#meshChanged(change));
  }

  /** Adds the engine's counters (`svc_alert_fired_total`, `svc_alert_resolved_total`) to the registry `/metrics` renders. */
  registerMetrics(registry: Registry): void {
    registry.registerMetric(this.#fired);
    registry.registerMetric(this.#resolved);
  }

  /** Re-reads the rules (after a rule or a channel changed). */
  reload(): void {
    const links = new Map<string, string[]>();
    for (const l of this.#q.ruleChannels()) links.set(l.rule_id, [...(links.get(l.rule_id) ?? []), l.channel_id]);
    const byEvent = new Map<string, CachedRule[]>();
    const byId = new Map<string, CachedRule>();
    for (const row of this.#q.rules()) {
      const rule = { row, channels: links.get(row.rule_id) ?? [] };
      byId.set(row.rule_id, rule);
      if (row.enabled === 1 && rule.channels.length > 0) byEvent.set(row.event, [...(byEvent.get(row.event) ?? []), rule]);
    }
    const pairRulesBefore = this.#pairRules;
    this.#pairRules = new Set((byEvent.get("mesh.pair_broken") ?? []).map((r) => r.row.rule_id));
    this.#byEvent = byEvent;
    this.#byId = byId;
    // A pair rule that starts to count sees the pairs broken before it.
    if (this.#started && !this.#stopped && [...this.#pairRules].some((id) => !pairRulesBefore.has(id))) this.#recheckPairs();
    // A disabled rule's fired alerts are still resolved: the hot path looks while any node rule exists.
    this.#nodeRules = [...byId.values()].some((r) => NODE_EVENTS.has(r.row.event));
  }

  /**
   * Arms the hold-off timer, and the group windows a previous run left open: their notices leave
   * when the window ends, at once when it ended while the service was down.
   */
  start(): void {
    this.#started = true;
    this.#broker = this.#d.brokerConnected();
    this.#armHeld(this.#q.nextHeldDue());
    const now = this.#d.clock.now();
    for (const channelId of this.#q.channelsWithNotices()) {
      const left = (this.#q.windowOpenedAt(channelId) ?? now) + this.#d.groupWindowMs - now;
      if (left > 0) this.#openWindow(channelId, left);
      else this.#closeWindow(channelId);
    }
    if (this.#pairRules.size > 0) this.#recheckPairs();
    // The link came back while this process was down: what was left open resolves now.
    if (this.#broker) this.#background((batch) => this.#resolve(batch, BROKER, ["broker.disconnected"]));
  }

  /**
   * Stops the timers; what is open or waiting stays stored for the next start. The hooks keep
   * writing (the actors' last group commit comes after): an open window's alerts still wait as
   * notices, which the next start sends.
   */
  stop(): void {
    this.#stopped = true;
    this.#d.clock.clearTimeout(this.#heldTimer);
    for (const t of this.#windows.values()) this.#d.clock.clearTimeout(t);
  }

  /**
   * Inside the group commit's transaction: opens and resolves the alerts of the nodes whose
   * presence or sync changed.
   * @returns what to run after the commit (undefined when nothing was written)
   */
  nodeChanges(changes: readonly NodeChange[]): (() => void) | undefined {
    if (!this.#nodeRules) return undefined;
    let relevant: NodeChange[] | undefined;
    for (const c of changes) {
      const b = c.before;
      if (b === undefined || (down(b) === down(c.after) && syncStuck(b) === syncStuck(c.after))) continue;
      (relevant ??= []).push(c);
    }
    if (relevant === undefined) return undefined;
    const list = relevant;
    return this.#run((batch) => {
      for (const c of list) this.#nodeChanged(batch, c);
    });
  }

  /**
   * Inside the command tracker's write of a final status: a push, start or stop that failed or
   * timed out alerts the `command.failed` rules covering its node.
   */
  commandFinished(c: Omit<FailedCommand, "nodeName">): (() => void) | undefined {
    const rules = this.#byEvent.get("command.failed");
    if (rules === undefined || !["push_config", "start", "stop"].includes(c.action)) return undefined;
    return this.#run((batch) => {
      let tags: string[] | undefined;
      const nodeTags = () => (tags ??= this.#q.nodeTags(c.nodeId));
      const failed = { ...c, nodeName: this.#q.nodeName(c.nodeId) };
      for (const rule of rules) {
        if (!inScope(rule.row, c.configId, c.nodeId, nodeTags)) continue;
        this.#dispatch(batch, rule.channels, commandFailedMessage(failed, rule.row, batch.now));
        batch.fired.push("command.failed");
      }
    });
  }

  /**
   * Inside a mesh write's transaction: the open alerts of the nodes it deleted, of their pairs
   * and, when the config goes, of all its nodes and pairs close (held ones silently, fired ones
   * with `alert.subject_removed`). A write that deletes nothing costs no statement.
   * @returns what to run after the commit (undefined when nothing was written)
   */
  meshWritten(change: MeshChange): (() => void) | undefined {
    if (change.rendered === true || (change.deleted.length === 0 && change.configDeleted !== true)) return undefined;
    if (!this.#q.anyOpen()) return undefined;
    const gone = new Set(change.deleted);
    return this.#run((batch) => {
      for (const row of this.#q.openOfConfig(change.configId)) {
        const pair = row.event === "mesh.pair_broken" ? (JSON.parse(row.detail) as AlertDetail).pair : undefined;
        const removed = change.configDeleted === true || (row.node_id !== null && gone.has(row.node_id)) || (pair !== undefined && (gone.has(pair.node_a) || gone.has(pair.node_b)));
        if (removed) this.#close(batch, row, "deleted");
      }
    });
  }

  /**
   * Inside a snapshot restore's transaction: every node and pair was replaced (restored nodes
   * start afresh, so nothing would ever resolve what was open), so their open alerts close as
   * {@link meshWritten} closes a deleted node's; the broker link's stay.
   * @returns what to run after the commit
   */
  restored(): (() => void) | undefined {
    return this.#run((batch) => {
      for (const row of this.#q.openOfMesh()) this.#close(batch, row, "restored");
    });
  }

  /** Closes one open alert whose subject is gone: a held one silently, a fired one with its removal message. */
  #close(batch: Batch, row: AlertOpenRow, removed: "deleted" | "restored"): void {
    this.#q.deleteOpen(row.alert_id);
    const channels = this.#byId.get(row.rule_id)?.channels;
    if (row.fired_at !== null && channels !== undefined) this.#dispatch(batch, channels, removedMessage(row, removed, batch.now));
    if (row.fired_at !== null) batch.resolved.push(row.event);
  }

  #fire(batch: Batch, rule: CachedRule, row: AlertOpenRow): void {
    this.#dispatch(batch, rule.channels, firedMessage(row, rule.row, batch.now));
    batch.fired.push(row.event);
  }

  #nodeChanged(batch: Batch, c: NodeChange): void {
    const before = c.before as NodeProjection;
    let tags: string[] | undefined;
    const nodeTags = () => (tags ??= this.#q.nodeTags(c.nodeId));
    const node: Subject = { subject: c.nodeId, configId: c.configId, nodeId: c.nodeId, covers: (rule) => inScope(rule, c.configId, c.nodeId, nodeTags) };
    if (!down(before) && down(c.after)) {
      const event = c.after.presence === "dropped" ? "node.dropped" : "node.offline";
      this.#open(batch, event, node);
    } else if (down(before) && !down(c.after)) {
      this.#resolve(batch, c.nodeId, NODE_DOWN_EVENTS);
    }
    if (!syncStuck(before) && syncStuck(c.after)) this.#open(batch, "node.sync_stuck", node);
    else if (syncStuck(before) && !syncStuck(c.after)) this.#resolve(batch, c.nodeId, ["node.sync_stuck"]);
  }

  /** Opens an alert per rule of `event` covering the subject (a node, a pair, the broker link): held for `for_s`, or fired now. */
  #open(batch: Batch, event: string, s: Subject, detail: AlertDetail = {}): void {
    const rules = this.#byEvent.get(event);
    if (rules === undefined) return;
    let named: AlertDetail | undefined;
    for (const rule of rules) {
      if (!s.covers(rule.row)) continue;
      named ??= s.nodeId === undefined ? detail : { node_name: this.#q.nodeName(s.nodeId), ...detail };
      const due = batch.now + rule.row.for_s * 1000;
      const row: AlertOpenRow = {
        alert_id: newId("alr"), rule_id: rule.row.rule_id, event, subject: s.subject,
        config_id: s.configId, node_id: s.nodeId ?? null, since: batch.now, due_at: due,
        fired_at: rule.row.for_s === 0 ? batch.now : null, detail: JSON.stringify(named),
      };
      this.#q.insertOpen(row);
      if (row.fired_at !== null) this.#fire(batch, rule, row);
      else batch.heldDue = Math.min(batch.heldDue ?? due, due);
    }
  }

  /** Closes the subject's open alerts of `events`: held ones silently, fired ones with their resolving message. */
  #resolve(batch: Batch, subject: string, events: readonly string[]): void {
    for (const row of this.#q.openOf(subject)) {
      if (!events.includes(row.event)) continue;
      this.#q.deleteOpen(row.alert_id);
      const channels = this.#byId.get(row.rule_id)?.channels;
      if (row.fired_at !== null && channels !== undefined) this.#dispatch(batch, channels, resolvedMessage(row, batch.now));
      if (row.fired_at !== null) batch.resolved.push(row.event);
    }
  }

  /** One message to each channel: to the outbox when the channel's window is closed (opening it), else a notice. */
  #dispatch(batch: Batch, channels: readonly string[], message: AlertMessage): void {
    const text = JSON.stringify(message);
    const now = batch.now;
    for (const channel_id of channels) {
      if (this.#windows.has(channel_id) || batch.opened.has(channel_id)) {
        this.#q.insertNotice(channel_id, text, now);
        continue;
      }
      this.#enqueue(batch, channel_id, message.type, text);
      batch.opened.add(channel_id);
    }
  }

  #enqueue(batch: Batch, channelId: string, type: string, text: string): void {
    const now = batch.now;
    this.#outbox.enqueue({
      delivery_id: newId("msg"), channel_id: channelId, type, message: text, status: "pending", attempts: 0,
      next_attempt_at: now, last_attempt_at: null, last_http_status: null, last_error: null, created_at: now, updated_at: now,
    });
    batch.enqueued += 1;
  }

  /**
   * Runs `fn` in a savepoint of the open transaction (or a transaction of its own). A fault rolls
   * the savepoint back and is logged.
   * @returns what applies the batch to memory, to run after the commit
   */
  #run(fn: (batch: Batch) => void): (() => void) | undefined {
    const batch: Batch = { now: this.#d.clock.now(), opened: new Set(), enqueued: 0, heldDue: null, fired: [], resolved: [] };
    try {
      this.#q.inTransaction(() => fn(batch));
    } catch (err) {
      this.#d.log.error({ err }, "alert rules: the change's alerts were not written");
      return undefined;
    }
    return () => this.#applied(batch);
  }

  #applied(batch: Batch): void {
    for (const event of batch.fired) this.#fired.inc({ event });
    for (const event of batch.resolved) this.#resolved.inc({ event });
    if (this.#stopped) return;
    for (const channelId of batch.opened) this.#openWindow(channelId, this.#d.groupWindowMs);
    if (batch.heldDue !== null) this.#armHeld(batch.heldDue);
    if (batch.enqueued > 0) this.#d.events.emit("alert.enqueued");
  }

  /** Runs `fn` in a transaction of its own between two others (timers, the broker link), then applies it. */
  #background(fn: (batch: Batch) => void): void {
    void this.#d.store
      .whenIdle(() => this.#run(fn)?.())
      .catch((err: unknown) => this.#d.log.error({ err }, "alert rules: background step failed"));
  }

  #openWindow(channelId: string, ms: number): void {
    this.#d.clock.clearTimeout(this.#windows.get(channelId));
    this.#windows.set(channelId, this.#d.clock.setTimeout(() => this.#closeWindow(channelId), ms));
  }

  /** A window ends: its notices leave as one grouped delivery and a new window opens; none, and it closes. */
  #closeWindow(channelId: string): void {
    this.#background((batch) => {
      const notices = this.#q.takeNotices(channelId).map((m) => JSON.parse(m) as AlertMessage);
      if (notices.length === 0) {
        this.#windows.delete(channelId);
        return;
      }
      const message = groupedMessage(notices, this.#d.groupWindowMs, batch.now);
      this.#enqueue(batch, channelId, message.type, JSON.stringify(message));
      batch.opened.add(channelId);
    });
  }

  #armHeld(due: number | null): void {
    if (due === null || !this.#started || this.#stopped || (this.#heldDue !== null && this.#heldDue <= due)) return;
    this.#d.clock.clearTimeout(this.#heldTimer);
    this.#heldDue = due;
    this.#heldTimer = this.#d.clock.setTimeout(() => this.#fireHeld(), Math.max(0, due - this.#d.clock.now()));
  }

  /** The held alerts now due fire (their condition still holds: a cleared one was deleted). */
  #fireHeld(): void {
    this.#heldDue = null;
    this.#background((batch) => {
      for (const row of this.#q.dueHeld(batch.now)) {
        const rule = this.#byId.get(row.rule_id);
        if (rule === undefined || rule.row.enabled !== 1) {
          this.#q.deleteOpen(row.alert_id); // its rule was disabled meanwhile: nothing to say
          continue;
        }
        this.#q.markFired(row.alert_id, batch.now);
        this.#fire(batch, rule, row);
      }
      batch.heldDue = this.#q.nextHeldDue();
    });
  }

  /**
   * After a committed mesh write (a deleted node's alerts closed in its transaction:
   * {@link meshWritten}): when a `mesh.pair_broken` rule exists, the pairs of the nodes it touched are read with their
   * integrity (derived, never stored) and compared with the open alerts: broken with none open
   * opens one (with the reason), open and no longer broken resolves.
   */
  #meshChanged(change: MeshChange): void {
    if (!this.#started || this.#stopped || change.rendered === true) return;
    if (change.configDeleted === true || !this.#byEvent.has("mesh.pair_broken")) return;
    const nodes = new Set([...change.touched, ...(change.paired ?? []), ...(change.unpaired ?? []), ...change.created.map((n) => n.node_id)]);
    if (nodes.size === 0) return;
    const readAt = this.#d.clock.now();
    void pairsOf(this.#d.store, change.configId, nodes)
      .then((pairs) =>
        this.#background((batch) => {
          this.#pairsChecked(batch, change.configId, pairs);
          if (change.paired !== undefined) this.#pairGone(batch, change.configId, change.paired, pairs, readAt);
        }),
      )
      .catch((err: unknown) => this.#d.log.error({ err, config_id: change.configId }, "alert rules: mesh pairs not checked"));
  }

  /**
   * A full check of the pairs against the open pair alerts: at start-up (a pair may have broken
   * or healed while the service was down) and when a pair rule starts to count (created, enabled,
   * given a channel: pairs broken before it). Per config, the pairs {@link pairsToRecheck} reads;
   * an open alert whose pair is no longer among them (deleted meanwhile) closes as deleted.
   */
  #recheckPairs(): void {
    void this.#d.store
      .whenIdle(() => ({ open: this.#q.openPairAlerts(), priv: this.#q.privateNodes() }))
      .then(async ({ open, priv }) => {
        const configs = new Map<string, { priv: string[]; sides: string[] }>();
        const of = (configId: string) => {
          let c = configs.get(configId);
          if (c === undefined) configs.set(configId, (c = { priv: [], sides: [] }));
          return c;
        };
        for (const n of priv) of(n.config_id).priv.push(n.node_id);
        for (const row of open) {
          const pair = (JSON.parse(row.detail) as AlertDetail).pair;
          if (row.config_id !== null && pair !== undefined) of(row.config_id).sides.push(pair.node_a, pair.node_b);
        }
        const wasOpen = new Set(open.map((r) => r.alert_id)); // an alert opened since was checked by its own write
        for (const [configId, c] of configs) {
          const pairs = await pairsToRecheck(this.#d.store, configId, c.priv, c.sides);
          const seen = new Set(pairs.map((p) => p.pair_id));
          this.#background((batch) => {
            this.#pairsChecked(batch, configId, pairs);
            for (const row of this.#q.openOfConfig(configId)) {
              if (row.event === "mesh.pair_broken" && wasOpen.has(row.alert_id) && !seen.has(row.subject)) this.#close(batch, row, "deleted");
            }
          });
        }
      })
      .catch((err: unknown) => this.#d.log.error({ err }, "alert rules: mesh pairs not rechecked"));
  }

  /** A pair this write deleted (its two sides, no longer among `pairs`): its alerts open when they were read close as deleted. */
  #pairGone(batch: Batch, configId: string, sides: readonly string[], pairs: readonly PairIntegrityState[], readAt: number): void {
    const seen = new Set(pairs.map((p) => p.pair_id));
    for (const row of this.#q.openOfConfig(configId)) {
      const pair = row.event === "mesh.pair_broken" && row.since <= readAt && !seen.has(row.subject) ? (JSON.parse(row.detail) as AlertDetail).pair : undefined;
      if (pair !== undefined && sides.includes(pair.node_a) && sides.includes(pair.node_b)) this.#close(batch, row, "deleted");
    }
  }

  /** Compares pairs with their open alerts: broken opens one per covering rule that has none (with the reason); no longer broken resolves. */
  #pairsChecked(batch: Batch, configId: string, pairs: readonly PairIntegrityState[]): void {
    for (const p of pairs) {
      const open = this.#q.openOf(p.pair_id).filter((r) => r.event === "mesh.pair_broken");
      if (p.status !== "broken") {
        if (open.length > 0) this.#resolve(batch, p.pair_id, ["mesh.pair_broken"]);
        continue;
      }
      const alerted = new Set(open.map((r) => r.rule_id));
      const tags = new Map<string, string[]>();
      const tagsOf = (nodeId: string) => () => tags.get(nodeId) ?? (tags.set(nodeId, this.#q.nodeTags(nodeId)), tags.get(nodeId) ?? []);
      const label = `${this.#q.nodeName(p.node_a) ?? p.node_a} ↔ ${this.#q.nodeName(p.node_b) ?? p.node_b}`;
      const detail: AlertDetail = { reason: p.reason ?? "broken", pair: { node_a: p.node_a, node_b: p.node_b, label } };
      const covers = (rule: AlertRuleRow) => !alerted.has(rule.rule_id) && (inScope(rule, configId, p.node_a, tagsOf(p.node_a)) || inScope(rule, configId, p.node_b, tagsOf(p.node_b)));
      this.#open(batch, "mesh.pair_broken", { configId, subject: p.pair_id, covers }, detail);
    }
  }

  /** The backend's broker link went down (alerts `broker.disconnected`) or came back (resolves them). */
  #brokerChanged(): void {
    if (!this.#started || this.#stopped) return;
    const connected = this.#d.brokerConnected();
    if (connected === this.#broker) return;
    this.#broker = connected;
    this.#background((batch) => {
      if (connected) this.#resolve(batch, BROKER, ["broker.disconnected"]);
      else this.#open(batch, "broker.disconnected", { subject: BROKER, configId: null, covers: () => true });
    });
  }
}

/** Whether a rule's scope covers the node: every field given must match (the tag among the node's tags). */
export function inScope(rule: Pick<AlertRuleRow, "scope_config_id" | "scope_node_id" | "scope_tag">, configId: string, nodeId: string, tags: () => readonly string[]): boolean {
  if (rule.scope_config_id !== null && rule.scope_config_id !== configId) return false;
  if (rule.scope_node_id !== null && rule.scope_node_id !== nodeId) return false;
  return rule.scope_tag === null || tags().includes(rule.scope_tag);
}
