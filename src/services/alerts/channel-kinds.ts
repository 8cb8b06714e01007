import { createTransport } from "nodemailer";
import { Webhook } from "standardwebhooks";
import type { AlertMessage } from "../../protocol/alerts.schema.js";
import { postOnce, type AttemptOutcome, type HttpPost, type SendContext } from "./http-send.js";
import { resolveTarget, TargetRefusedError } from "./safe-target.js";

/**
 * How each kind of channel carries an alert (docs/alerts.md "Channels"). One function per kind
 * builds the request from the outbox's message; {@link sendToChannel} sends it once.
 */

/** A channel's settings with its secrets opened, as one attempt needs them. */
export type OpenedChannel =
  | { kind: "webhook"; url: string; secrets: string[] }
  | { kind: "slack"; url: string }
  | { kind: "ntfy"; url: string }
  | { kind: "email"; host: string; port: number; tls_mode: "implicit" | "starttls" | "none"; username?: string | undefined; password?: string | undefined; from: string; to: string[] };

/**
 * Standard Webhooks 1.0: body `{type, timestamp, data}`; `webhook-id` is the delivery's id (the
 * same on every attempt: the receiver's idempotency key), `webhook-timestamp` the attempt's time
 * in seconds, `webhook-signature` one `v1,<base64>` per signing secret, space-separated (a
 * rotated secret signs beside the new one for its grace period). Signed by the `standardwebhooks`
 * library.
 */
export function webhookRequest(url: string, secrets: readonly string[], deliveryId: string, message: AlertMessage, now: number): HttpPost {
  const body = JSON.stringify({ type: message.type, timestamp: message.timestamp, data: message.data });
  const at = new Date(Math.floor(now / 1000) * 1000);
  const signature = secrets.map((s) => new Webhook(s).sign(deliveryId, at, body)).join(" ");
  return {
    url,
    body,
    headers: {
      "content-type": "application/json",
      "webhook-id": deliveryId,
      "webhook-timestamp": String(Math.floor(now / 1000)),
      "webhook-signature": signature,
    },
  };
}

const SLACK_EMOJI: Record<AlertMessage["severity"], string> = { info: ":information_source:", warning: ":warning:", critical: ":rotating_light:", resolved: ":white_check_mark:" };

/** Slack's mrkdwn needs `&`, `<` and `>` escaped. */
const mrkdwn = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** A Slack incoming webhook: `{text, blocks}` (the text is the notification's fallback). */
export function slackRequest(url: string, message: AlertMessage): HttpPost {
  const text = `${SLACK_EMOJI[message.severity]} ${message.title}`;
  const blocks = [
    { type: "section", text: { type: "mrkdwn", text: `${SLACK_EMOJI[message.severity]} *${mrkdwn(message.title)}*\n${mrkdwn(message.text)}` } },
    { type: "context", elements: [{ type: "mrkdwn", text: `${mrkdwn(message.type)} · ${message.timestamp}` }] },
  ];
  return { url, body: JSON.stringify({ text, blocks }), headers: { "content-type": "application/json" } };
}

const NTFY_PRIORITY: Record<AlertMessage["severity"], string> = { info: "default", warning: "high", critical: "urgent", resolved: "default" };
const NTFY_TAGS: Record<AlertMessage["severity"], string> = { info: "information_source", warning: "warning", critical: "rotating_light", resolved: "white_check_mark" };

/** An HTTP header value: as is when ASCII, else RFC 2047 encoded (ntfy decodes it). */
const headerText = (text: string) => (/^[\x20-\x7e]*$/.test(text) ? text : `=?UTF-8?B?${Buffer.from(text, "utf8").toString("base64")}?=`);

/** ntfy: the text POSTed to the topic URL, with `Title`, `Priority` and `Tags` headers. */
export function ntfyRequest(url: string, message: AlertMessage): HttpPost {
  return {
    url,
    body: message.text,
    headers: { "content-type": "text/plain; charset=utf-8", title: headerText(message.title), priority: NTFY_PRIORITY[message.severity], tags: `${NTFY_TAGS[message.severity]},${message.type}` },
  };
}

/**
 * Sends an email through the channel's SMTP server with nodemailer: the host is resolved and
 * checked like any target and the connection goes to that address (TLS still verifies the
 * certificate for the host name). nodemailer's own logging is off: nothing it would log (the
 * AUTH exchange included) reaches the service's log.
 */
export async function sendEmail(ch: Extract<OpenedChannel, { kind: "email" }>, message: AlertMessage, ctx: SendContext): Promise<AttemptOutcome> {
  let target;
  try {
    target = await resolveTarget(ch.host, ctx);
  } catch (err) {
    return { ok: false, status: null, error: err instanceof TargetRefusedError ? err.message : String(err) };
  }
  const transport = createTransport({
    host: target.address,
    port: ch.port,
    secure: ch.tls_mode === "implicit",
    requireTLS: ch.tls_mode === "starttls",
    ignoreTLS: ch.tls_mode === "none",
    tls: { servername: ch.host },
    ...(ch.username === undefined ? {} : { auth: { user: ch.username, pass: ch.password ?? "" } }),
    connectionTimeout: ctx.timeoutMs,
    greetingTimeout: ctx.timeoutMs,
    socketTimeout: ctx.timeoutMs,
    logger: false,
    debug: false,
  });
  try {
    const info = await transport.sendMail({ from: ch.from, to: ch.to, subject: message.title, text: `${message.text}\n\n${message.type} · ${message.timestamp}\n` });
    const code = Number(/^(\d{3})/.exec(String(info.response))?.[1] ?? 250);
    return { ok: true, status: code, error: null };
  } catch (err) {
    const e = err as { responseCode?: number; code?: string; message?: string };
    return { ok: false, status: e.responseCode ?? null, error: `SMTP ${e.code ?? "error"}: ${(e.message ?? "").slice(0, 300)}` };
  } finally {
    transport.close();
  }
}

/** Sends `message` once to the channel. Never throws. */
export async function sendToChannel(ch: OpenedChannel, deliveryId: string, message: AlertMessage, ctx: SendContext): Promise<AttemptOutcome> {
  switch (ch.kind) {
    case "webhook":
      return postOnce(webhookRequest(ch.url, ch.secrets, deliveryId, message, ctx.clock.now()), ctx);
    case "slack":
      return postOnce(slackRequest(ch.url, message), ctx);
    case "ntfy":
      return postOnce(ntfyRequest(ch.url, message), ctx);
    case "email":
      return sendEmail(ch, message, ctx);
  }
}
