import { useEffect, useRef, useState, type FormEvent } from "react";
import { ALERT_RULE_EVENTS, MAX_FOR_S, createAlertRuleBody } from "../../../../src/protocol/alert-rules.schema.js";
import { useGate } from "../../api/roles.js";
import type { AlertRuleEvent, AlertRuleView, ChannelView, ConfigView } from "../../api/types.js";
import { FormError, invalidProps } from "../../components/form-error.js";
import { useCreateRule, useUpdateRule } from "./mutations.js";

/** What each event means, in the words of the person on call (docs/alerts.md "Rules"). */
export const EVENT_LABEL: Record<AlertRuleEvent, string> = {
  "node.offline": "a node goes offline",
  "node.dropped": "a node drops (missed heartbeats)",
  "node.sync_stuck": "a node's config stays pending while online",
  "command.failed": "a push, start or stop fails",
  "mesh.pair_broken": "a mesh pair's integrity breaks",
  "broker.disconnected": "the service loses its MQTT broker",
};

/**
 * A tag and a node id as `tagSchema` and `ID_PATTERN` (src/protocol) take them, for the inputs'
 * own check before sending (an input's pattern is a `v`-flag expression: a `-` in a class is escaped).
 */
const TAG_PATTERN = "[a-zA-Z0-9][a-zA-Z0-9_.:\\-]{0,31}";
const NODE_ID_PATTERN = "[a-z0-9][a-z0-9_\\-]{0,63}";

/** The form's labels by wire field: how an API error names the field. */
const RULE_LABELS = { name: "Rule name", event: "When", for_s: "Hold-off (seconds)", scope: "Scope", channel_ids: "Send to", enabled: "Enabled" } as const;

interface RuleFields {
  name: string;
  event: AlertRuleEvent;
  for_s: string;
  config_id: string;
  tag: string;
  node_id: string;
  channel_ids: string[];
  enabled: boolean;
}

function ruleFieldsOf(rule: AlertRuleView | null): RuleFields {
  return {
    name: rule?.name ?? "",
    event: rule?.event ?? "node.offline",
    for_s: String(rule?.for_s ?? 60),
    config_id: rule?.scope.config_id ?? "",
    tag: rule?.scope.tag ?? "",
    node_id: rule?.scope.node_id ?? "",
    channel_ids: rule?.channel_ids ?? [],
    enabled: rule?.enabled ?? true,
  };
}

/**
 * The body of a creation or an edit: the whole rule (a broker rule takes no scope), sending to
 * the chosen channels that are still listed (one deleted meanwhile has left the list, and the
 * rules that named it).
 */
function ruleBodyOf(f: RuleFields, listed: ReadonlySet<string>) {
  const scope = f.event === "broker.disconnected" ? {} : { ...(f.config_id === "" ? {} : { config_id: f.config_id }), ...(f.tag.trim() === "" ? {} : { tag: f.tag.trim() }), ...(f.node_id.trim() === "" ? {} : { node_id: f.node_id.trim() }) };
  return { name: f.name.trim(), event: f.event, for_s: Number(f.for_s), scope, channel_ids: f.channel_ids.filter((id) => listed.has(id)), enabled: f.enabled };
}

/** The form's state and its submission; an edit of a field clears the last error. */
function useRuleForm(rule: AlertRuleView | null, channels: ChannelView[], onDone: () => void) {
  const [fields, setFields] = useState<RuleFields>(() => ruleFieldsOf(rule));
  const create = useCreateRule();
  const update = useUpdateRule();
  const mutation = rule === null ? create : update;
  const set = <K extends keyof RuleFields>(field: K, value: RuleFields[K]) => {
    if (mutation.isError) mutation.reset();
    setFields((f) => ({ ...f, [field]: value }));
  };
  const body = ruleBodyOf(fields, new Set(channels.map((c) => c.channel_id)));
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (rule === null) create.mutate(body, { onSuccess: () => setFields(ruleFieldsOf(null)) });
    else update.mutate({ rule, body }, { onSuccess: onDone });
  };
  return { fields, body, set, submit, mutation };
}

/**
 * New rule or, with `rule`, its edit: a name, the event, how long it must hold (`for_s`: a node
 * down and back within it sends nothing), which nodes (config, tag, node; none: all), which
 * channels, enabled.
 */
export function RuleForm({ rule, channels, configs, onDone }: { rule: AlertRuleView | null; channels: ChannelView[]; configs: ConfigView[]; onDone: () => void }) {
  const { fields, body, set, submit, mutation } = useRuleForm(rule, channels, onDone);
  const gate = useGate(rule === null ? "createAlertRule" : "updateAlertRule");
  const nameRef = useRef<HTMLInputElement>(null);
  // The edit starts at the name (the parent keys the form by rule, so a new edit is a new form).
  useEffect(() => {
    if (rule !== null) nameRef.current?.focus();
  }, [rule?.rule_id]);
  const invalid = (field: keyof typeof RULE_LABELS) => invalidProps(mutation.error, RULE_LABELS, field, "rule-form-error");
  return (
    <form className="card form rule-form" onSubmit={submit} aria-labelledby="rule-form-title">
      <h2 id="rule-form-title">{rule === null ? "New rule" : `Edit rule “${rule.name}”`}</h2>
      <div className="form-row">
        <div>
          <label htmlFor="rule-name">Rule name</label>
          <input id="rule-name" ref={nameRef} value={fields.name} maxLength={createAlertRuleBody.shape.name.maxLength ?? undefined} onChange={(e) => set("name", e.target.value)} required {...invalid("name")} />
        </div>
        <div className="grow-2">
          <label htmlFor="rule-event">When</label>
          <select id="rule-event" value={fields.event} onChange={(e) => set("event", e.target.value as AlertRuleEvent)} {...invalid("event")}>
            {ALERT_RULE_EVENTS.map((ev) => (
              <option key={ev} value={ev}>
                {EVENT_LABEL[ev]} ({ev})
              </option>
            ))}
          </select>
        </div>
        <div>
          <label htmlFor="rule-for">Hold-off (seconds)</label>
          <input id="rule-for" type="number" min={0} max={MAX_FOR_S} step={1} value={fields.for_s} onChange={(e) => set("for_s", e.target.value)} required {...invalid("for_s")} />
        </div>
      </div>
      {fields.event !== "broker.disconnected" && <ScopeFields fields={fields} set={set} configs={configs} />}
      <ChannelChoice channels={channels} chosen={fields.channel_ids} onChange={(ids) => set("channel_ids", ids)} />
      <label className="checkbox">
        <input type="checkbox" checked={fields.enabled} onChange={(e) => set("enabled", e.target.checked)} /> Enabled
      </label>
      <div className="form-actions">
        <button type="submit" className="primary" {...gate.props} disabled={gate.disabled || mutation.isPending || body.name === "" || body.channel_ids.length === 0}>
          {rule === null ? "Create rule" : "Save rule"}
        </button>
        {rule !== null && (
          <button type="button" onClick={onDone}>
            Cancel
          </button>
        )}
        {gate.reason}
      </div>
      <FormError error={mutation.error} labels={RULE_LABELS} id="rule-form-error" />
    </form>
  );
}

function ScopeFields({ fields, set, configs }: { fields: RuleFields; set: <K extends keyof RuleFields>(f: K, v: RuleFields[K]) => void; configs: ConfigView[] }) {
  return (
    <fieldset className="form-row rule-scope">
      <legend>
        Which nodes <span className="muted small">(each field given narrows it; none: every node)</span>
      </legend>
      <div>
        <label htmlFor="rule-config">Config</label>
        <select id="rule-config" value={fields.config_id} onChange={(e) => set("config_id", e.target.value)}>
          <option value="">any config</option>
          {configs.map((c) => (
            <option key={c.config_id} value={c.config_id}>
              {c.name}
            </option>
          ))}
        </select>
      </div>
      <div>
        <label htmlFor="rule-tag">Tag</label>
        <input id="rule-tag" value={fields.tag} maxLength={32} pattern={TAG_PATTERN} title="1-32 of a-z A-Z 0-9 _ . : -" placeholder="any tag" onChange={(e) => set("tag", e.target.value)} />
      </div>
      <div>
        <label htmlFor="rule-node">Node id</label>
        <input id="rule-node" value={fields.node_id} maxLength={64} pattern={NODE_ID_PATTERN} title="a node's id: lower case, digits, _ and -" placeholder="any node" onChange={(e) => set("node_id", e.target.value)} />
      </div>
    </fieldset>
  );
}

/** The channels a rule sends to (at least one), as checkboxes. */
function ChannelChoice({ channels, chosen, onChange }: { channels: ChannelView[]; chosen: string[]; onChange: (ids: string[]) => void }) {
  const toggle = (id: string, on: boolean) => onChange(on ? [...chosen, id] : chosen.filter((c) => c !== id));
  return (
    <fieldset className="rule-channels">
      <legend>Send to</legend>
      {channels.length === 0 && <p className="muted small">Create a channel first.</p>}
      {channels.map((c) => (
        <label key={c.channel_id} className="checkbox">
          <input type="checkbox" checked={chosen.includes(c.channel_id)} onChange={(e) => toggle(c.channel_id, e.target.checked)} /> {c.name}
          {!c.enabled && <span className="muted small"> (disabled)</span>}
        </label>
      ))}
    </fieldset>
  );
}
