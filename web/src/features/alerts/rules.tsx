import { useState } from "react";
import { useGate } from "../../api/roles.js";
import type { AlertRuleView, ChannelView } from "../../api/types.js";
import { DeleteDialog } from "../../components/delete-dialog.js";
import { FormError } from "../../components/form-error.js";
import { QueryView } from "../../components/states.js";
import { useConfigs } from "../configs/queries.js";
import { useDeleteRule, useUpdateRule } from "./mutations.js";
import { useAlertRules } from "./queries.js";
import { EVENT_LABEL, RuleForm } from "./rule-form.js";
import { TableHead } from "../../components/table-head.js";

/**
 * The rules part of the Alerts page (docs/alerts.md "Rules"): the new-rule form (or the edit of
 * one) and the list, live over SSE `alert.rule.updated`. `channels` are the page's channel list:
 * the form's choices and the names the list shows.
 */
export function RulesSection({ channels }: { channels: ChannelView[] }) {
  const query = useAlertRules(true);
  const remove = useDeleteRule();
  const configs = useConfigs().data?.configs ?? [];
  const [editing, setEditing] = useState<AlertRuleView | null>(null);
  const [deleting, setDeleting] = useState<AlertRuleView | null>(null);
  const channelNames = new Map(channels.map((c) => [c.channel_id, c.name]));
  const configNames = new Map(configs.map((c) => [c.config_id, c.name]));
  const names: Names = { channel: (id) => channelNames.get(id) ?? id, config: (id) => configNames.get(id) ?? id };
  return (
    <>
      <RuleForm key={editing?.rule_id ?? "new"} rule={editing} channels={channels} configs={configs} onDone={() => setEditing(null)} />
      <section className="card" aria-labelledby="rule-list-title">
        <h2 id="rule-list-title">Rules</h2>
        <QueryView query={query} isEmpty={(d) => d.rules.length === 0} empty={<p>No rules yet: nothing is sent until a rule names a channel.</p>} loadingLabel="Loading rules…">
          {(data) => <RulesTable rules={data.rules} names={names} onEdit={setEditing} onDelete={setDeleting} />}
        </QueryView>
      </section>
      <DeleteDialog item={deleting} what="rule" nameOf={(r) => r.name} remove={remove} onClose={() => setDeleting(null)}>
        <p>What it watches is no longer alerted, and its open alerts are dropped without a resolved message. Deliveries it already made stay in the log.</p>
      </DeleteDialog>
    </>
  );
}

/** Names in place of ids: a channel's, a config's (the id itself when not in the lists). */
interface Names {
  channel: (id: string) => string;
  config: (id: string) => string;
}

/** Which nodes a rule covers, in words: "every node", or its config, tag and node; a broker rule watches the service itself. */
export function scopeText(r: AlertRuleView, configName: (id: string) => string): string {
  if (r.event === "broker.disconnected") return "the service's broker link";
  const s = r.scope;
  const given = [s.config_id === undefined ? null : `config ${configName(s.config_id)}`, s.tag === undefined ? null : `tag ${s.tag}`, s.node_id === undefined ? null : `node ${s.node_id}`].filter((p) => p !== null);
  return given.length === 0 ? "every node" : given.join(", ");
}

interface RowActions {
  onEdit: (r: AlertRuleView) => void;
  onDelete: (r: AlertRuleView) => void;
}

function RulesTable({ rules, names, ...actions }: { rules: AlertRuleView[]; names: Names } & RowActions) {
  return (
    <div className="table-wrap">
      <table className="table stack-table rules-table">
        <caption className="visually-hidden">Alert rules</caption>
        <TableHead columns={["Name", "When", "Hold-off", "Scope", "Send to", "State"]} hidden="Actions" />
        <tbody>
          {rules.map((r) => (
            <RuleRow key={r.rule_id} rule={r} names={names} {...actions} />
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** One rule: name, event in words with its wire name, hold-off, scope, channels, state; Edit, Disable or Enable, Delete. */
function RuleRow({ rule: r, names, onEdit, onDelete }: { rule: AlertRuleView; names: Names } & RowActions) {
  const toggle = useUpdateRule();
  const gates = { update: useGate("updateAlertRule"), remove: useGate("deleteAlertRule") };
  return (
    <tr>
      <th scope="row">{r.name}</th>
      <td data-label="When">
        {EVENT_LABEL[r.event]} <span className="muted mono rule-event">({r.event})</span>
      </td>
      <td data-label="Hold-off">{r.for_s === 0 ? "none" : `${r.for_s} s`}</td>
      <td data-label="Scope">{scopeText(r, names.config)}</td>
      <td data-label="Send to">{r.channel_ids.map(names.channel).join(", ")}</td>
      <td data-label="State">{r.enabled ? <span className="badge badge-online">enabled</span> : <span className="badge badge-offline">disabled</span>}</td>
      <td className="actions">
        <div className="actions">
          <button type="button" {...gates.update.props} aria-label={`Edit rule ${r.name}`} disabled={gates.update.disabled} onClick={() => onEdit(r)}>
            Edit
          </button>
          <button type="button" {...gates.update.props} aria-label={`${r.enabled ? "Disable" : "Enable"} rule ${r.name}`} disabled={gates.update.disabled || toggle.isPending} onClick={() => toggle.mutate({ rule: r, body: { enabled: !r.enabled } })}>
            {r.enabled ? "Disable" : "Enable"}
          </button>
          <button type="button" {...gates.remove.props} className="danger-outline" aria-label={`Delete rule ${r.name}`} disabled={gates.remove.disabled} onClick={() => onDelete(r)}>
            Delete
          </button>
        </div>
        <FormError error={toggle.error} />
      </td>
    </tr>
  );
}
