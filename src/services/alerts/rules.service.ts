import { AppError } from "../../errors.js";
import type { EventHub } from "../../events/hub.js";
import { isoTime, type Clock } from "../../lib/clock.js";
import type { AlertRuleView, CreateAlertRuleBody, UpdateAlertRuleBody } from "../../protocol/alert-rules.schema.js";
import { newId } from "../../protocol/ids.js";
import * as repo from "../../store/alert-rules.repository.js";
import type { AfterCommit, Trx } from "../../store/connection.js";
import type { Store } from "../../store/db.js";
import type { AlertRuleRow } from "../../store/schema.js";
import type { AlertRuleEngine } from "./rule-engine.js";

export interface AlertRulesServiceDeps {
  store: Store;
  clock: Clock;
  hub: Pick<EventHub, "publish">;
  /** Re-reads the rules after each change commits. */
  engine: Pick<AlertRuleEngine, "reload">;
}

/**
 * Alert rules' CRUD (docs/alerts.md "Rules"): which event, for which nodes (`scope`), after how
 * long (`for_s`), through which channels. Each change re-reads the rule engine's cache after its
 * commit and goes out as SSE `alert.rule.updated`. A change of a rule's event, scope or hold-off
 * closes its open alerts without a message (they were opened by the old condition).
 */
export class AlertRulesService {
  readonly #d: AlertRulesServiceDeps;

  constructor(deps: AlertRulesServiceDeps) {
    this.#d = deps;
  }

  /** Every rule, by name. */
  async list(): Promise<AlertRuleView[]> {
    return (await repo.listAlertRules(this.#d.store.db)).map(ruleView);
  }

  /** @throws AppError NOT_FOUND */
  async get(ruleId: string): Promise<AlertRuleView> {
    return ruleView(await this.#row(ruleId));
  }

  /** @throws AppError VALIDATION_FAILED (an unknown channel, a scope on a broker rule), CONFLICT (the name is taken) */
  async create(body: CreateAlertRuleBody): Promise<AlertRuleView> {
    const now = this.#d.clock.now();
    const row: AlertRuleRow = {
      rule_id: newId("rul"), name: body.name, event: body.event, for_s: body.for_s,
      scope_config_id: body.scope.config_id ?? null, scope_tag: body.scope.tag ?? null, scope_node_id: body.scope.node_id ?? null,
      enabled: body.enabled ? 1 : 0, created_at: now, updated_at: now,
    };
    return this.#d.store.transaction(async (trx, afterCommit) => {
      await checkRule(trx, row, body.channel_ids);
      await repo.insertAlertRule(trx, row, body.channel_ids);
      return this.#committed(trx, afterCommit, row.rule_id);
    });
  }

  /** @throws AppError NOT_FOUND, VALIDATION_FAILED, CONFLICT */
  async update(ruleId: string, update: UpdateAlertRuleBody): Promise<AlertRuleView> {
    return this.#d.store.transaction(async (trx, afterCommit) => {
      const { channel_ids: oldChannels, ...old } = await this.#row(ruleId, trx);
      const scope = update.scope;
      const next: AlertRuleRow = {
        ...old,
        name: update.name ?? old.name, event: update.event ?? old.event, for_s: update.for_s ?? old.for_s,
        ...(scope === undefined ? {} : { scope_config_id: scope.config_id ?? null, scope_tag: scope.tag ?? null, scope_node_id: scope.node_id ?? null }),
        enabled: update.enabled === undefined ? old.enabled : update.enabled ? 1 : 0,
        updated_at: this.#d.clock.now(),
      };
      await checkRule(trx, next, update.channel_ids ?? oldChannels, ruleId);
      await repo.updateAlertRule(trx, ruleId, next, update.channel_ids);
      const condition = (r: AlertRuleRow) => [r.event, r.for_s, r.scope_config_id, r.scope_tag, r.scope_node_id].join("\u0000");
      if (condition(old) !== condition(next)) await repo.deleteOpenAlertsOfRule(trx, ruleId);
      return this.#committed(trx, afterCommit, ruleId);
    });
  }

  /** Deletes a rule and its open alerts (no message: the rule is gone). @throws AppError NOT_FOUND */
  async delete(ruleId: string): Promise<void> {
    await this.#d.store.transaction(async (trx, afterCommit) => {
      if (!(await repo.deleteAlertRule(trx, ruleId))) throw new AppError("NOT_FOUND", `no alert rule ${ruleId}`);
      afterCommit(() => {
        this.#d.engine.reload();
        this.#d.hub.publish("alert.rule.updated", { rule_id: ruleId, rule: null });
      });
    });
  }

  async #committed(trx: Trx, afterCommit: AfterCommit, ruleId: string): Promise<AlertRuleView> {
    const view = ruleView(await this.#row(ruleId, trx));
    afterCommit(() => {
      this.#d.engine.reload();
      this.#d.hub.publish("alert.rule.updated", { rule_id: ruleId, rule: view });
    });
    return view;
  }

  async #row(ruleId: string, db: Trx | Store["db"] = this.#d.store.db): Promise<repo.AlertRuleWithChannels> {
    const row = await repo.findAlertRule(db, ruleId);
    if (!row) throw new AppError("NOT_FOUND", `no alert rule ${ruleId}`);
    return row;
  }
}

/** @throws AppError CONFLICT (name taken), VALIDATION_FAILED (unknown channels; a scope on a broker rule) */
async function checkRule(trx: Trx, row: AlertRuleRow, channelIds: readonly string[], exceptId?: string): Promise<void> {
  if (await repo.alertRuleNameTaken(trx, row.name, exceptId)) throw new AppError("CONFLICT", `an alert rule named ${row.name} exists`);
  const unknown = await repo.unknownAlertChannels(trx, channelIds);
  if (unknown.length > 0) throw new AppError("VALIDATION_FAILED", `no alert channel ${unknown.join(", ")}`);
  const scoped = row.scope_config_id !== null || row.scope_tag !== null || row.scope_node_id !== null;
  if (row.event === "broker.disconnected" && scoped) throw new AppError("VALIDATION_FAILED", "a broker.disconnected rule watches the backend's own broker link: it takes no scope");
}

/** A rule as the API shows it. */
export function ruleView(row: repo.AlertRuleWithChannels): AlertRuleView {
  return {
    rule_id: row.rule_id,
    name: row.name,
    event: row.event,
    for_s: row.for_s,
    scope: {
      ...(row.scope_config_id === null ? {} : { config_id: row.scope_config_id }),
      ...(row.scope_tag === null ? {} : { tag: row.scope_tag }),
      ...(row.scope_node_id === null ? {} : { node_id: row.scope_node_id }),
    } as AlertRuleView["scope"],
    channel_ids: row.channel_ids,
    enabled: row.enabled === 1,
    created_at: isoTime(row.created_at),
    updated_at: isoTime(row.updated_at),
  };
}
