import { randomBytes } from "node:crypto";
import { AppError } from "../../errors.js";
import { isoTime } from "../../lib/clock.js";
import { WEBHOOK_SECRET_PREFIX, type ChannelView, type CreateChannelBody, type UpdateChannelBody } from "../../protocol/alerts.schema.js";
import type { AlertChannelRow } from "../../store/schema.js";
import type { OpenedChannel } from "./channel-kinds.js";

/**
 * Alert channels' settings and secrets (docs/alerts.md "Channels", "Secrets"). The non-secret
 * settings are one JSON column (`target`); the secret of a kind (a webhook's signing secret, an
 * SMTP password, a Slack incoming-webhook URL) is sealed with AES-256-GCM under the data
 * directory's key file (the broker-password vault, src/mqtt/broker-passwords.ts), bound to the
 * channel's id, and no answer but the creating or rotating one ever carries it.
 */

/** What seals and opens secrets: the broker-password vault. */
export interface SecretVault {
  seal(username: string, secret: string): string;
  open(username: string, sealed: string): string | undefined;
}

/** How long a rotated webhook secret keeps signing beside the new one, ms. */
export const SECRET_GRACE_MS = 24 * 3600 * 1000;

/** The vault's authenticated-data name of a channel's secrets: a sealed secret copied to another channel does not open. */
export const vaultName = (channelId: string) => `alert-channel:${channelId}`;

/** A new Standard Webhooks signing secret: `whsec_` and 32 random bytes, base64. */
export const newWebhookSecret = () => `${WEBHOOK_SECRET_PREFIX}${randomBytes(32).toString("base64")}`;

/** The non-secret settings kept in `target`. */
export interface ChannelTarget {
  url?: string;
  host?: string;
  port?: number;
  tls_mode?: "implicit" | "starttls" | "none";
  username?: string;
  from?: string;
  to?: string[];
}

const DEFAULT_SMTP_PORT = { implicit: 465, starttls: 587, none: 25 } as const;
type Fields = Omit<CreateChannelBody, "name" | "kind">;

/** A Slack URL as the API shows it: its origin, the path (the credential) left out. */
const urlHint = (url: string) => `${new URL(url).origin}/…`;

/**
 * The target and plain secret of a channel of `kind` from the given fields (a creation's, or a
 * stored channel's merged with an update's).
 * @throws AppError VALIDATION_FAILED naming the missing or foreign field
 */
export function channelSettings(kind: AlertChannelRow["kind"], f: Fields): { target: ChannelTarget; secret: string | undefined } {
  const smtpFields = (["host", "port", "tls_mode", "username", "password", "from", "to"] as const).filter((k) => f[k] !== undefined);
  if (kind !== "email") {
    if (f.url === undefined) throw new AppError("VALIDATION_FAILED", `a ${kind} channel needs url`);
    if (smtpFields.length > 0) throw new AppError("VALIDATION_FAILED", `a ${kind} channel takes no ${smtpFields.join(", ")}`);
    if (kind === "slack") return { target: { url: urlHint(f.url) }, secret: f.url };
    return { target: { url: f.url }, secret: undefined };
  }
  if (f.url !== undefined) throw new AppError("VALIDATION_FAILED", "an email channel takes no url");
  for (const k of ["host", "from", "to"] as const) if (f[k] === undefined) throw new AppError("VALIDATION_FAILED", `an email channel needs ${k}`);
  if (f.password !== undefined && f.username === undefined) throw new AppError("VALIDATION_FAILED", "an SMTP password needs a username");
  const tls = f.tls_mode ?? "starttls";
  const target: ChannelTarget = { host: f.host as string, port: f.port ?? DEFAULT_SMTP_PORT[tls], tls_mode: tls, from: f.from as string, to: f.to as string[] };
  if (f.username !== undefined) target.username = f.username;
  return { target, secret: f.password };
}

/** The stored fields of a channel merged with an update's (a secret left out of the update is kept). */
export function mergedFields(row: AlertChannelRow, update: UpdateChannelBody, storedSecret: string | undefined): Fields {
  const target = JSON.parse(row.target) as ChannelTarget;
  const { name: _name, enabled: _enabled, rotate_secret: _rotate, ...fields } = update;
  if (row.kind === "email") {
    const keep: Fields = { host: target.host, port: target.port, tls_mode: target.tls_mode, username: target.username, from: target.from, to: target.to };
    if (storedSecret !== undefined) keep.password = storedSecret;
    const merged = { ...keep, ...Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) } as Fields;
    if (update.port === undefined && update.tls_mode !== undefined) delete merged.port; // a new TLS mode brings its port
    return Object.fromEntries(Object.entries(merged).filter(([, v]) => v !== undefined)) as Fields;
  }
  const url = fields.url ?? (row.kind === "slack" ? storedSecret : target.url);
  return { ...Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)), ...(url === undefined ? {} : { url }) };
}

/** A channel row as the API shows it (no secret). */
export function channelView(row: AlertChannelRow, now: number): ChannelView {
  const target = JSON.parse(row.target) as ChannelTarget;
  const until = row.previous_secret_until;
  return {
    channel_id: row.channel_id,
    name: row.name,
    kind: row.kind,
    target,
    has_secret: row.secret_sealed !== null,
    previous_secret_until: until !== null && until > now && row.previous_secret_sealed !== null ? isoTime(until) : null,
    enabled: row.enabled === 1,
    disabled_reason: row.disabled_reason,
    disabled_at: row.disabled_at === null ? null : isoTime(row.disabled_at),
    failing_since: row.failing_since === null ? null : isoTime(row.failing_since),
    created_at: isoTime(row.created_at),
    updated_at: isoTime(row.updated_at),
  };
}

/**
 * A channel's settings with its secrets opened, for one attempt at `now`: a webhook signs with
 * its secret and, within the grace period, the rotated one.
 * @returns the opened channel, or a reason it cannot be (its sealed secret does not open)
 */
export function openChannel(row: AlertChannelRow, vault: SecretVault, now: number): OpenedChannel | string {
  const t = JSON.parse(row.target) as ChannelTarget;
  const secret = row.secret_sealed === null ? undefined : vault.open(vaultName(row.channel_id), row.secret_sealed);
  if (row.secret_sealed !== null && secret === undefined) return "the channel's secret cannot be opened (the data directory's key file is missing or another one)";
  switch (row.kind) {
    case "webhook": {
      const secrets = secret === undefined ? [] : [secret];
      if (row.previous_secret_sealed !== null && row.previous_secret_until !== null && now < row.previous_secret_until) {
        const previous = vault.open(vaultName(row.channel_id), row.previous_secret_sealed);
        if (previous !== undefined) secrets.push(previous);
      }
      return { kind: "webhook", url: t.url ?? "", secrets };
    }
    case "slack":
      return { kind: "slack", url: secret ?? "" };
    case "ntfy":
      return { kind: "ntfy", url: t.url ?? "" };
    case "email":
      return { kind: "email", host: t.host ?? "", port: t.port ?? 587, tls_mode: t.tls_mode ?? "starttls", username: t.username, password: secret, from: t.from ?? "", to: t.to ?? [] };
  }
}
