import { useEffect, useRef, useState, type FormEvent } from "react";
import { CHANNEL_KINDS, SMTP_TLS_MODES, createChannelBody } from "../../../../src/protocol/alerts.schema.js";
import { useGate } from "../../api/roles.js";
import type { ChannelKind, ChannelView, CreateChannelBody, UpdateChannelBody } from "../../api/types.js";
import { FormError, invalidProps } from "../../components/form-error.js";
import { useCreateChannel, useUpdateChannel } from "./mutations.js";

/** What the URL of each kind that takes one is (docs/alerts.md "Channels"). */
const URL_LABEL: Record<Exclude<ChannelKind, "email">, string> = { webhook: "Receiver URL", slack: "Incoming webhook URL", ntfy: "Topic URL" };

/** A kind in words, for the kind picker and the channel list. */
export const KIND_LABEL: Record<ChannelKind, string> = { webhook: "Webhook (signed)", slack: "Slack", ntfy: "ntfy", email: "Email (SMTP)" };

/** The form's labels by wire field: how an API error names the field. */
function labelsOf(kind: ChannelKind): Record<string, string> {
  return { name: "Name", kind: "Kind", url: kind === "email" ? "URL" : URL_LABEL[kind], host: "SMTP host", port: "Port", tls_mode: "TLS", username: "SMTP username", password: "SMTP password", from: "From", to: "To" };
}

/** The form's fields as typed (strings; empty: not given). */
interface Fields {
  name: string;
  kind: ChannelKind;
  url: string;
  host: string;
  port: string;
  tls_mode: string;
  username: string;
  password: string;
  from: string;
  to: string;
}

/**
 * The fields a channel starts the edit with: its target as the API shows it. Secrets are never
 * shown (a Slack URL is one: its target shows its origin only), so they start empty and an empty
 * one is kept.
 */
function fieldsOf(channel: ChannelView | null): Fields {
  const t = channel?.target ?? {};
  return {
    name: channel?.name ?? "",
    kind: channel?.kind ?? "webhook",
    url: channel?.kind === "slack" ? "" : (t.url ?? ""),
    host: t.host ?? "",
    port: t.port === undefined ? "" : String(t.port),
    tls_mode: t.tls_mode ?? "",
    username: t.username ?? "",
    password: "",
    from: t.from ?? "",
    to: (t.to ?? []).join(", "),
  };
}

/** The kind's settings to send: what was typed, empty fields left out (an edit keeps them). */
function settingsOf(f: Fields): Omit<CreateChannelBody, "name" | "kind"> {
  if (f.kind !== "email") return f.url.trim() === "" ? {} : { url: f.url.trim() };
  const to = f.to.split(/[\s,;]+/).filter((a) => a !== "");
  return {
    ...(f.host.trim() === "" ? {} : { host: f.host.trim() }),
    ...(f.port === "" ? {} : { port: Number(f.port) }),
    ...(f.tls_mode === "" ? {} : { tls_mode: f.tls_mode as (typeof SMTP_TLS_MODES)[number] }),
    ...(f.username === "" ? {} : { username: f.username }),
    ...(f.password === "" ? {} : { password: f.password }),
    ...(f.from.trim() === "" ? {} : { from: f.from.trim() }),
    ...(to.length === 0 ? {} : { to }),
  };
}

type ChannelWithSecret = ChannelView & { secret?: string | undefined };

/** The form's state and its submission: a creation (the form empties) or an edit (`onDone` after it). An edit of a field clears the last error. */
function useChannelForm(channel: ChannelView | null, onCreated: (created: ChannelWithSecret) => void, onDone: () => void) {
  const [fields, setFields] = useState<Fields>(() => fieldsOf(channel));
  const create = useCreateChannel();
  const update = useUpdateChannel();
  const mutation = channel === null ? create : update;
  const set = (field: keyof Fields) => (value: string) => {
    if (mutation.isError) mutation.reset();
    setFields((f) => ({ ...f, [field]: value }));
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (channel === null) {
      const onSuccess = (created: ChannelWithSecret) => {
        setFields(fieldsOf(null));
        onCreated(created);
      };
      create.mutate({ name: fields.name.trim(), kind: fields.kind, ...settingsOf(fields) }, { onSuccess });
    } else {
      const body: UpdateChannelBody = { ...(fields.name.trim() === channel.name ? {} : { name: fields.name.trim() }), ...settingsOf(fields) };
      update.mutate({ channel, body }, { onSuccess: onDone });
    }
  };
  return { fields, set, submit, mutation };
}

/**
 * New channel (name, kind, the kind's settings) or, with `channel`, its edit (the kind stays;
 * a secret left empty is kept). `onCreated` gets the answer, which for a webhook carries its
 * signing secret this once.
 */
export function ChannelForm({ channel, onCreated, onDone }: { channel: ChannelView | null; onCreated: (created: ChannelWithSecret) => void; onDone: () => void }) {
  const { fields, set, submit, mutation } = useChannelForm(channel, onCreated, onDone);
  const gate = useGate(channel === null ? "createAlertChannel" : "updateAlertChannel");
  const nameRef = useRef<HTMLInputElement>(null);
  // The edit starts at the name (the parent keys the form by channel, so a new edit is a new form).
  useEffect(() => {
    if (channel !== null) nameRef.current?.focus();
  }, [channel?.channel_id]);
  const labels = labelsOf(fields.kind);
  const invalid = (field: string) => invalidProps(mutation.error, labels, field, "channel-form-error");
  const title = channel === null ? "New channel" : `Edit channel “${channel.name}”`;
  return (
    <form className="card form channel-form" onSubmit={submit} aria-labelledby="channel-form-title">
      <h2 id="channel-form-title">{title}</h2>
      <div className="form-row">
        <div>
          <label htmlFor="channel-name">Name</label>
          <input id="channel-name" ref={nameRef} value={fields.name} maxLength={createChannelBody.shape.name.maxLength ?? undefined} onChange={(e) => set("name")(e.target.value)} required {...invalid("name")} />
        </div>
        <div>
          <label htmlFor="channel-kind">Kind</label>
          <select id="channel-kind" value={fields.kind} disabled={channel !== null} onChange={(e) => set("kind")(e.target.value)} {...invalid("kind")}>
            {CHANNEL_KINDS.map((k) => (
              <option key={k} value={k}>
                {KIND_LABEL[k]}
              </option>
            ))}
          </select>
        </div>
        {fields.kind !== "email" && <UrlField kind={fields.kind} value={fields.url} editing={channel !== null} onChange={set("url")} invalid={invalid("url")} />}
      </div>
      {fields.kind === "email" && <EmailFields fields={fields} set={set} editing={channel !== null} invalid={invalid} />}
      <p className="muted small">{kindHint(fields.kind)}</p>
      <div className="form-actions">
        <button type="submit" className="primary" {...gate.props} disabled={gate.disabled || mutation.isPending || fields.name.trim() === ""}>
          {channel === null ? "Create channel" : "Save channel"}
        </button>
        {channel !== null && (
          <button type="button" onClick={onDone}>
            Cancel
          </button>
        )}
        {gate.reason}
      </div>
      <FormError error={mutation.error} labels={labels} id="channel-form-error" />
    </form>
  );
}

/** What one alert through the kind is, in a sentence (docs/alerts.md "Channels"). */
function kindHint(kind: ChannelKind): string {
  switch (kind) {
    case "webhook":
      return "A JSON POST signed per Standard Webhooks; its signing secret (whsec_…) is shown once, after creation.";
    case "slack":
      return "A Slack incoming webhook: the URL is its credential and is never shown again.";
    case "ntfy":
      return "A POST to the ntfy topic URL with the alert's title, priority and tags.";
    case "email":
      return "One message per alert through your SMTP server; the password is never shown again.";
  }
}

function UrlField(p: { kind: Exclude<ChannelKind, "email">; value: string; editing: boolean; onChange: (v: string) => void; invalid: object }) {
  const keep = p.editing && p.kind === "slack";
  return (
    <div className="grow-2">
      <label htmlFor="channel-url">{URL_LABEL[p.kind]}</label>
      <input
        id="channel-url"
        type="url"
        inputMode="url"
        autoComplete="off"
        value={p.value}
        placeholder={keep ? "unchanged (leave empty to keep)" : "https://…"}
        required={!p.editing}
        onChange={(e) => p.onChange(e.target.value)}
        {...p.invalid}
      />
    </div>
  );
}

function EmailFields({ fields, set, editing, invalid }: { fields: Fields; set: (f: keyof Fields) => (v: string) => void; editing: boolean; invalid: (f: string) => object }) {
  const text = (field: keyof Fields, label: string, extra: Record<string, unknown> = {}) => (
    <div>
      <label htmlFor={`channel-${field}`}>{label}</label>
      <input id={`channel-${field}`} autoComplete="off" value={fields[field]} onChange={(e) => set(field)(e.target.value)} {...extra} {...invalid(field)} />
    </div>
  );
  return (
    <>
      <div className="form-row">
        {text("host", "SMTP host", { required: !editing, placeholder: "smtp.example.com" })}
        {text("port", "Port", { type: "number", min: 1, max: 65535, placeholder: "by TLS mode" })}
        <div>
          <label htmlFor="channel-tls_mode">TLS</label>
          <select id="channel-tls_mode" value={fields.tls_mode} onChange={(e) => set("tls_mode")(e.target.value)} {...invalid("tls_mode")}>
            <option value="">{editing ? "unchanged" : "STARTTLS (default)"}</option>
            <option value="implicit">implicit TLS (465)</option>
            <option value="starttls">STARTTLS (587)</option>
            <option value="none">none (25)</option>
          </select>
        </div>
      </div>
      <div className="form-row">
        {text("username", "SMTP username")}
        {text("password", "SMTP password", { type: "password", autoComplete: "new-password", placeholder: editing ? "unchanged (leave empty to keep)" : "" })}
        {text("from", "From", { type: "email", required: !editing })}
        {text("to", "To", { required: !editing, placeholder: "a@example.com, b@example.com" })}
      </div>
    </>
  );
}
